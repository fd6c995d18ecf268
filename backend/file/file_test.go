package file_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/file"
)

func TestOpenURL(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l, err := dlock.Open(ctx, "file://"+dir+"/sub?ttl=2s")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	m, _ := l.NewMutex("k")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if m.Lease().TTL != 2*time.Second {
		t.Errorf("TTL %v; want the URL's 2s", m.Lease().TTL)
	}
	if _, err := os.Stat(filepath.Join(dir, "sub", "k-k.lock")); err != nil {
		t.Errorf("state file: %v", err)
	}
	_ = m.Unlock(ctx)
	_ = l.Close()

	for _, bad := range []string{
		"file://otherhost/tmp/x",
		"file:relative/dir",
		"file://" + dir + "?mode=0600",
		"file://user@/tmp/x",
	} {
		if _, err := dlock.Open(ctx, bad); !errors.Is(err, dlock.ErrInvalidURL) {
			t.Errorf("Open(%q): %v; want ErrInvalidURL", bad, err)
		}
	}
	if _, err := file.New("relative", dlock.WithTTL(time.Second)); !errors.Is(err, dlock.ErrInvalidURL) {
		t.Errorf("New(relative): %v; want ErrInvalidURL", err)
	}
	notDir := filepath.Join(dir, "plain")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := file.New(notDir); !errors.Is(err, dlock.ErrUnavailable) {
		t.Errorf("New(a plain file): %v; want ErrUnavailable", err)
	}
}

func TestDefaultDir(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1234")
	if got := file.DefaultDir(); got != "/run/user/1234/dlock" {
		t.Errorf("DefaultDir with XDG_RUNTIME_DIR: %q", got)
	}
	t.Setenv("XDG_RUNTIME_DIR", "")
	if got := file.DefaultDir(); !strings.HasPrefix(filepath.Base(got), "dlock-") {
		t.Errorf("DefaultDir without XDG_RUNTIME_DIR: %q", got)
	}
}

// Removing a held key's state file from outside breaks the hold: the holder
// is told at its next renewal, and the next holder's token is still greater.
func TestRemovedStateFile(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	l1, _ := file.New(dir, dlock.WithTTL(300*time.Millisecond))
	l2, _ := file.New(dir, dlock.WithTTL(300*time.Millisecond))
	defer l1.Close()
	defer l2.Close()
	m1, _ := l1.NewMutex("x")
	if err := m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	token := m1.Token()
	if err := os.Remove(file.Path(dir, "x")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m1.Done():
	case <-ctx.Done():
		t.Fatal("holder not told that its state file was removed")
	}
	m2, _ := l2.NewMutex("x")
	if err := m2.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if m2.Token() <= token {
		t.Fatalf("token %d after the file was removed; want more than %d", m2.Token(), token)
	}
	if err := m1.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock of the broken hold: %v; want ErrLockLost", err)
	}
	if err := m2.Unlock(ctx); err != nil {
		t.Fatalf("the successor's Unlock: %v", err)
	}
}

// A corrupt state file is a clear backend error, never a lock.
func TestCorruptStateFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(file.Path(dir, "x"), []byte("not a lock\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, _ := file.New(dir)
	defer l.Close()
	m, _ := l.NewMutex("x")
	err := m.TryLock(ctx)
	if !errors.Is(err, dlock.ErrUnavailable) || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("TryLock on a corrupt state file: %v; want ErrUnavailable mentioning corruption", err)
	}
}
