package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dlock-go/dlock/driver"
)

// errWatchBroken reports a watch channel that closed without an error.
var errWatchBroken = errors.New("etcd: watch closed")

// code returns the gRPC code of an etcd client error.
func code(err error) codes.Code {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code()
	}
	return status.Code(err)
}

// leaseGone reports whether err says the lease no longer exists on the
// server: it expired or was revoked.
func leaseGone(err error) bool {
	return errors.Is(err, rpctypes.ErrLeaseNotFound) || errors.Is(err, rpctypes.ErrGRPCLeaseNotFound)
}

// overSizeLimit reports a message the client's gRPC refused to send or
// to take for the size limits it was given: sending the request again gets
// the same refusal, so it is not an unavailability to wait out. (The
// server's own ResourceExhausted, "too many requests", is one.)
func overSizeLimit(err error) bool {
	return code(err) == codes.ResourceExhausted && strings.Contains(err.Error(), "larger than max")
}

// mapErr turns an etcd client error into what the driver contract wants: the
// caller's context error as is, ErrLockLost for a vanished lease, a plain
// error for requests the server refused on their merits (permissions, bad
// arguments, a message over the client's size limits), and ErrUnavailable
// for everything else: the network, a lost quorum, a leader election, an
// overloaded or closing client.
func mapErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil && (errors.Is(err, cerr) || code(err) == codes.Canceled || code(err) == codes.DeadlineExceeded) {
		return cerr
	}
	if leaseGone(err) {
		return fmt.Errorf("etcd: lease expired or revoked: %w: %w", driver.ErrLockLost, err)
	}
	if errors.Is(err, driver.ErrLockLost) || errors.Is(err, driver.ErrUnavailable) {
		return err // the driver's own verdict
	}
	if overSizeLimit(err) {
		return fmt.Errorf("etcd: a message exceeds the client's size limit (clientv3.Config.MaxCallSendMsgSize or MaxCallRecvMsgSize): %w", err)
	}
	switch code(err) {
	case codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated,
		codes.FailedPrecondition, codes.OutOfRange, codes.AlreadyExists, codes.Unimplemented:
		return fmt.Errorf("etcd: %w", err)
	}
	return driver.Unavailable(err)
}
