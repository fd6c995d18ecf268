package consul

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/consul/api"

	"github.com/dlock-go/dlock/driver"
)

// ErrPermission reports that the Consul agent refused a request for lack of
// ACL permissions (a missing or wrong CONSUL_HTTP_TOKEN, or a token without
// session:write and key:write on the prefix). It is not ErrUnavailable:
// retrying will not help.
var ErrPermission = errors.New("consul: permission denied (check the ACL token)")

// mapErr classifies an error from the Consul client. The caller's context
// error is returned as is; a refusal for lack of permission is
// ErrPermission; anything else (transport errors, 5xx, 429, a leader
// election in progress) matches driver.ErrUnavailable.
func mapErr(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	if errors.Is(err, driver.ErrUnavailable) || errors.Is(err, ErrPermission) {
		return err
	}
	var se api.StatusError
	if errors.As(err, &se) && se.Code == 403 || isPermission(err) {
		return fmt.Errorf("%s: %w: %v", op, ErrPermission, err)
	}
	return driver.Unavailable(fmt.Errorf("consul: %s: %w", op, err))
}

func isPermission(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Permission denied") || strings.Contains(s, "ACL not found") ||
		strings.Contains(s, "response code: 403")
}

// txnErrors joins the reasons Consul gave for rolling a transaction back.
func txnErrors(resp *api.TxnResponse) string {
	if resp == nil || len(resp.Errors) == 0 {
		return "rolled back"
	}
	parts := make([]string, len(resp.Errors))
	for i, e := range resp.Errors {
		parts[i] = fmt.Sprintf("op %d: %s", e.OpIndex, e.What)
	}
	return strings.Join(parts, "; ")
}

// invalidSession reports whether a transaction was rolled back because the
// session no longer exists.
func invalidSession(resp *api.TxnResponse) bool {
	if resp == nil {
		return false
	}
	for _, e := range resp.Errors {
		if strings.Contains(e.What, "invalid session") {
			return true
		}
	}
	return false
}

// failedOp reports whether a rolled-back transaction names operation i
// among its errors.
func failedOp(resp *api.TxnResponse, i int) bool {
	if resp == nil {
		return false
	}
	for _, e := range resp.Errors {
		if e.OpIndex == i {
			return true
		}
	}
	return false
}
