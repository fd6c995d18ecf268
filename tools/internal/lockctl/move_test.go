package lockctl

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/dlock-go/dlock"
)

func TestMoveStatusAndCommit(t *testing.T) {
	ctx := context.Background()
	x, y := "file://"+t.TempDir(), "file://"+t.TempDir()
	c1 := "move:?from=" + url.QueryEscape(x) + "&to=" + url.QueryEscape(y)
	c2 := "move:?to=" + url.QueryEscape(y)
	run := func(args ...string) (int, string, string) {
		sys, out, errb := testIO(nil)
		code := Main(ctx, append([]string{"move"}, args...), sys)
		return code, out.String(), errb.String()
	}
	lock := func(raw string) (*dlock.Locker, *dlock.Mutex) {
		l, err := dlock.Open(ctx, raw, dlock.WithOwner("worker-1"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		m, _ := l.NewMutex("job")
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		return l, m
	}

	// A C0 instance holds the key: status says so, commit refuses.
	_, m0 := lock(x)
	code, out, _ := run("status", "--from", x, "--to", y, "job")
	if code != 0 || !strings.Contains(out, "commit: none") || !strings.Contains(out, "X: held in C0 by worker-1") || !strings.Contains(out, "Y: free") {
		t.Fatalf("status with a C0 holder: %d\n%s", code, out)
	}
	code, _, errs := run("commit", "--from", x, "--to", y, "job")
	if code != ExitNotAcquired || !strings.Contains(errs, "C0 instance") {
		t.Fatalf("commit with a C0 holder: %d %q", code, errs)
	}
	if _, err := dlock.Open(ctx, c2); err == nil {
		t.Fatal("C2 opened before the commit")
	}
	_ = m0.Unlock(ctx)

	// A C1 instance holds it: commit goes ahead.
	_, m1 := lock(c1)
	code, out, _ = run("status", "--from", x, "--to", y, "job")
	if code != 0 || !strings.Contains(out, "X: held in C1 by worker-1") || !strings.Contains(out, "Y: held in C1 by worker-1") {
		t.Fatalf("status with a C1 holder: %d\n%s", code, out)
	}
	code, out, errs = run("commit", "--from", x, "--to", y, "job")
	if code != 0 || !strings.Contains(out, "committed: og=") {
		t.Fatalf("commit: %d %q %q", code, out, errs)
	}
	if code, out, _ = run("commit", "--from", x, "--to", y); code != 0 || !strings.Contains(out, "already committed") {
		t.Fatalf("second commit: %d %q", code, out)
	}
	_ = m1.Unlock(ctx)
	_, m2 := lock(c2)
	code, out, _ = run("status", "--to", y, "job")
	if code != 0 || !strings.Contains(out, "commit: og=") || !strings.Contains(out, "Y: held in C2 by worker-1") || !strings.Contains(out, "token base on Y") {
		t.Fatalf("status with a C2 holder: %d\n%s", code, out)
	}
	_ = m2.Unlock(ctx)
	if code, _, _ := run("commit", "--to", y); code != ExitUsage {
		t.Fatalf("commit without --from: %d", code)
	}
}
