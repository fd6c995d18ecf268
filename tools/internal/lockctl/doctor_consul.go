package lockctl

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/dlock-go/dlock/backend/consul"
)

func (d *doctor) consul(ctx context.Context) error {
	cfg := api.DefaultConfig()
	if d.u.Host != "" {
		hosts, err := d.hosts("8500")
		if err != nil {
			return err
		}
		cfg.Address = hosts[0]
	}
	c, err := api.NewClient(cfg)
	if err != nil {
		return err
	}
	qo := (&api.QueryOptions{}).WithContext(ctx)

	// The round trip and the clock by the HTTP Date header (1s resolution).
	var rtt time.Duration
	var st, b, a time.Time
	for range 5 {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Scheme+"://"+cfg.Address+"/v1/status/leader", nil)
		if err != nil {
			return err
		}
		if cfg.Token != "" {
			req.Header.Set("X-Consul-Token", cfg.Token)
		}
		before := time.Now()
		resp, err := cfg.HttpClient.Do(req)
		after := time.Now()
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		t, derr := http.ParseTime(resp.Header.Get("Date"))
		if took := after.Sub(before); derr == nil && (rtt == 0 || took < rtt) {
			rtt, st, b, a = took, t, before, after
		}
	}
	if st.IsZero() {
		d.info("clock.skew", "the agent sent no Date header: doctor cannot measure the clock skew")
	} else {
		// Date is truncated to the second: the server time is within [Date, Date+1s).
		d.clockSkew("clock.skew", st.Add(500*time.Millisecond), b, a, 500*time.Millisecond)
	}
	d.roundTrip("rtt", rtt)

	self, err := c.Agent().Self()
	if err != nil {
		return err
	}
	if conf, ok := self["Config"]; ok {
		d.info("consul.version", fmt.Sprintf("Consul %v (datacenter %v)", conf["Version"], conf["Datacenter"]))
	}
	minTTL := consul.MinTTL
	if dbg, ok := self["DebugConfig"]; ok {
		if v, ok := dbg["SessionTTLMin"].(string); ok {
			if dd, err := time.ParseDuration(v); err == nil && dd > 0 {
				minTTL = dd
			}
		}
	}
	switch {
	case d.ttl < minTTL:
		d.add("consul.session-ttl", LevelWarning, fmt.Sprintf("lease %v below the agent's session_ttl_min %v", d.ttl, minTTL),
			"Consul refuses shorter session TTLs: a Locker with this ttl= is lengthened to the minimum, and WithTTL of it is refused (dlock.ErrInvalidOption); a holder that dies keeps the lock that long",
			fmt.Sprintf("use ttl=%v or more, or lower session_ttl_min in the servers' configuration", minTTL))
	case d.ttl > consul.MaxTTL:
		d.add("consul.session-ttl", LevelBroken, fmt.Sprintf("lease %v above Consul's session TTL maximum %v", d.ttl, consul.MaxTTL),
			"Consul refuses it: no lock can be acquired", fmt.Sprintf("use a ttl= of at most %v", consul.MaxTTL))
	default:
		d.ok("consul.session-ttl", fmt.Sprintf("lease %v within the session TTL limits (%v..%v); Consul may keep an abandoned session up to twice its TTL", d.ttl, minTTL, consul.MaxTTL))
	}
	delay := consul.DefaultLockDelay
	if v := d.u.Query().Get("lockdelay"); v != "" {
		if delay, err = time.ParseDuration(v); err != nil {
			return err
		}
	}
	if delay == 0 {
		d.info("consul.lock-delay", "lockdelay=0: a key whose session ended (expired or broken) can be taken at once; dlock's validity window and fencing tokens still hold, but Consul adds no margin of its own")
	} else {
		d.ok("consul.lock-delay", fmt.Sprintf("lock-delay %v: after a session ends (expired or broken) Consul keeps its key from new holders that long", delay))
	}

	peers, err := c.Status().PeersWithQueryOptions(qo)
	switch {
	case err != nil:
		d.unknown("consul.servers", err)
	case len(peers)%2 == 0:
		d.add("consul.servers", LevelWarning, fmt.Sprintf("%d servers", len(peers)),
			"an even count tolerates no more failures than one fewer", "run 3 or 5 servers")
	case len(peers) == 1:
		d.info("consul.servers", "1 server: no failover (a restart makes locks unavailable, not unsafe)")
	default:
		d.ok("consul.servers", fmt.Sprintf("%d servers", len(peers)))
	}
	return nil
}
