package consul

import (
	"context"
	"time"

	"github.com/hashicorp/consul/api"
)

// monitorWait is how long one blocking query of a monitor or watch waits
// on the server before it is re-issued.
const monitorWait = 2 * time.Minute

// monitorRetry is the pause after a failed blocking query of a monitor.
const monitorRetry = time.Second

// startMonitor watches a new hold's key with blocking queries and closes
// its Lost channel as soon as the key is deleted (the session was destroyed
// or expired: behavior=delete) or stops being the hold's. At most
// cap(d.monSem) holds are monitored at a time; the others learn of a loss
// at their next renewal.
func (d *consulDriver) startMonitor(h *hold) {
	select {
	case d.monSem <- struct{}{}:
	default:
		return
	}
	ctx, cancel := context.WithCancel(d.ctx)
	h.stopMon = cancel
	if !d.goTracked(func() {
		defer func() { <-d.monSem }()
		defer cancel()
		d.monitor(ctx, h)
	}) {
		<-d.monSem
		cancel()
	}
}

func (d *consulDriver) monitor(ctx context.Context, h *hold) {
	index := h.token
	for {
		q := (&api.QueryOptions{WaitIndex: index, WaitTime: monitorWait}).WithContext(ctx)
		kv, meta, err := d.bc.KV().Get(h.path, q)
		if h.released.Load() || ctx.Err() != nil {
			return
		}
		if err != nil {
			// Transient as far as we know: renewals decide whether the
			// hold survives an outage.
			select {
			case <-ctx.Done():
				return
			case <-time.After(monitorRetry):
			}
			continue
		}
		if !h.owns(kv) {
			h.lost.Mark()
			return
		}
		if meta.LastIndex > index {
			index = meta.LastIndex
		}
	}
}
