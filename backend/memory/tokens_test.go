package memory_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/backend/memory"
)

// childEnv makes the test binary, run again, print one token and exit.
const childEnv = "DLOCK_MEMORY_TOKEN_CHILD"

// lockOnce takes key in a mem:// store of this process and returns the
// token.
func lockOnce(t testing.TB, key string) dlock.Token {
	t.Helper()
	tok, err := lockOnceErr(key)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func lockOnceErr(key string) (dlock.Token, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := dlock.Open(ctx, "mem://tokens-across-processes")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	m, err := l.NewMutex(key)
	if err != nil {
		return 0, err
	}
	if err := m.Lock(ctx); err != nil {
		return 0, err
	}
	tok := m.Token()
	return tok, m.Unlock(ctx)
}

// TestMain runs the child's side of TestTokensIncreaseAcrossProcesses when
// asked to: lock once, print the token, exit.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		tok, err := lockOnceErr("k")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("token=%d\n", tok)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Tokens keep increasing from one process to the next, so that a fence
// that outlives the process (a table in a database) accepts the next
// process's holders: each process's first token is above every token the
// earlier ones issued.
func TestTokensIncreaseAcrossProcesses(t *testing.T) {
	var last dlock.Token
	for i := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, out)
		}
		_, after, ok := strings.Cut(string(out), "token=")
		if !ok {
			t.Fatalf("child %d printed no token:\n%s", i, out)
		}
		n, err := strconv.ParseUint(strings.Fields(after)[0], 10, 64)
		if err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
		tok := dlock.Token(n)
		t.Logf("process %d: token %d", i+1, tok)
		if tok <= last {
			t.Fatalf("process %d's first token %d is not greater than %d from the process before", i+1, tok, last)
		}
		last = tok
	}
	if tok := lockOnce(t, "k"); tok <= last {
		t.Fatalf("this process's token %d is not greater than %d from the child before", tok, last)
	}
}
