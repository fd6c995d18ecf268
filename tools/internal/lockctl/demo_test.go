package lockctl

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/dlock-go/dlock/backend/memory"
)

// The stock scenario in goroutines: oversold without the lock, exact with
// it.
func TestDemoRun(t *testing.T) {
	ctx := context.Background()
	cfg := demoConfig{url: "file://" + t.TempDir(), stock: 15, workers: 6, pause: time.Millisecond}
	free, err := demoRun(ctx, cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	if free.Oversold <= 0 || free.Orders <= free.Stock {
		t.Errorf("without a lock: %+v; want oversold", free)
	}
	locked, err := demoRun(ctx, cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	if locked.Oversold != 0 || locked.Orders != 15 || locked.StockLeft != 0 || !locked.TokensIncrease {
		t.Errorf("with the lock: %+v; want 15 orders, none oversold", locked)
	}
}

// sell stops on an empty stock and records each order with its token.
func TestSell(t *testing.T) {
	l, err := memory.New(memory.NewStore())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m, _ := l.NewMutex("k")
	s := &memShop{}
	s.v.Store(3)
	var orders []order
	if err := sell(context.Background(), 7, s, m, 0, func(o order) error { orders = append(orders, o); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(orders) != 3 || orders[0].Seen != 3 || orders[2].Seen != 1 || orders[0].Worker != 7 || orders[0].Token == 0 {
		t.Fatalf("orders %+v", orders)
	}
	if m.Token() != 0 {
		t.Fatal("sell left the lock held")
	}
}

func TestDemoMainJSON(t *testing.T) {
	sys, out, errb := testIO(nil)
	code := Main(context.Background(), []string{"demo", "--json", "--backend", "mem://", "--stock", "5", "--workers", "3"}, sys)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	var rep struct{ Runs []demoResult }
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || len(rep.Runs) != 2 {
		t.Fatalf("%v: %s", err, out)
	}
}
