package file

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
)

func recordCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestRecordRace(t *testing.T) {
	ctx := recordCtx(t)
	dir := t.TempDir()
	for round := 0; round < 20; round++ {
		key := fmt.Sprintf("race-%d", round)
		const n = 8
		got := make([]string, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d := newDriver(dir)
				defer d.Close()
				<-start
				got[i], errs[i] = d.Record(ctx, key, fmt.Sprintf("permits=%d", i+1))
			}()
		}
		close(start)
		wg.Wait()
		for i := range got {
			if errs[i] != nil {
				t.Fatalf("round %d caller %d: %v", round, i, errs[i])
			}
			if got[i] != got[0] {
				t.Fatalf("round %d: callers got %q; want one value for all", round, got)
			}
		}
	}
	// No temporary file is left behind.
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

// A record file that is not ours is an error, not a value.
func TestRecordCorrupt(t *testing.T) {
	ctx := recordCtx(t)
	d := newDriver(t.TempDir())
	defer d.Close()
	if err := os.WriteFile(d.recordPath("k"), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Record(ctx, "k", "v"); !errors.Is(err, driver.ErrUnavailable) {
		t.Errorf("Record over a corrupt file: %v; want ErrUnavailable", err)
	}
}
