package fence_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/fence"
)

func TestRuleCheck(t *testing.T) {
	cases := []struct {
		highest, token dlock.Token
		want           error
	}{
		{0, 1, nil},
		{5, 5, nil}, // equal: the same holder again
		{5, 6, nil},
		{5, 4, fence.ErrStale},
		{math.MaxUint64, math.MaxUint64 - 1, fence.ErrStale},
		{0, 0, fence.ErrNoToken},
		{5, 0, fence.ErrNoToken},
	}
	for _, c := range cases {
		err := fence.Rule{Resource: "k", Highest: c.highest}.Check(c.token)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("Rule{Highest: %d}.Check(%d) = %v, want %v", c.highest, c.token, err, c.want)
		}
	}
}

// The token checked and the highest seen are told apart by name: a token
// below the highest is stale, whichever order the numbers are written in.
func TestRuleNamesItsNumbers(t *testing.T) {
	if err := (fence.Rule{Resource: "r", Highest: 10}).Check(5); !errors.Is(err, fence.ErrStale) {
		t.Errorf("token 5 after highest 10: %v, want ErrStale", err)
	}
	if err := (fence.Rule{Highest: 5, Resource: "r"}).Check(10); err != nil {
		t.Errorf("token 10 after highest 5: %v, want nil", err)
	}
}

func TestStaleErrorCarriesBothNumbers(t *testing.T) {
	err := fence.Rule{Resource: "stock/42", Highest: 17}.Check(9)
	var se *fence.StaleError
	if !errors.As(err, &se) {
		t.Fatalf("got %v, want a *StaleError", err)
	}
	if se.Token != 9 || se.Highest != 17 || se.Resource != "stock/42" {
		t.Errorf("StaleError = %+v", se)
	}
	for _, s := range []string{"9", "17", "stock/42"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("message %q lacks %q", err, s)
		}
	}
}

func TestNoTokenMessage(t *testing.T) {
	err := fence.Rule{Resource: "k"}.Check(0)
	if !errors.Is(err, fence.ErrNoToken) || errors.Is(err, fence.ErrStale) {
		t.Fatalf("got %v", err)
	}
	if !strings.Contains(err.Error(), "no lock held") {
		t.Errorf("message %q does not say that no lock is held", err)
	}
}

func TestEncodeToken(t *testing.T) {
	toks := []dlock.Token{0, 1, 9, 10, 1 << 53, 1<<53 + 1, math.MaxInt64, math.MaxInt64 + 1, math.MaxUint64 - 1, math.MaxUint64}
	for i, tok := range toks {
		s := fence.EncodeToken(tok)
		if len(s) != 20 {
			t.Errorf("EncodeToken(%d) = %q, not 20 digits", tok, s)
		}
		back, err := fence.DecodeToken(s)
		if err != nil || back != tok {
			t.Errorf("DecodeToken(%q) = %d, %v", s, back, err)
		}
		if i > 0 && !(fence.EncodeToken(toks[i-1]) < s) {
			t.Errorf("byte order of %d and %d is not numeric order", toks[i-1], tok)
		}
	}
	if _, err := fence.DecodeToken("x1"); err == nil {
		t.Error("DecodeToken accepted garbage")
	}
}
