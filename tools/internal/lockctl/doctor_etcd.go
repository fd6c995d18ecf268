package lockctl

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdLeaseBug reports whether etcd version v renews leases on a deposed
// leader (etcd issue 15247, fixed in 3.4.25 and 3.5.8).
func etcdLeaseBug(v string) bool {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 3 {
		return false
	}
	major, _ := strconv.Atoi(parts[0])
	minor, _ := strconv.Atoi(parts[1])
	patch, _ := strconv.Atoi(strings.FieldsFunc(parts[2], func(r rune) bool { return r < '0' || r > '9' })[0])
	switch {
	case major != 3:
		return false
	case minor < 4:
		return true
	case minor == 4:
		return patch < 25
	case minor == 5:
		return patch < 8
	}
	return false
}

func (d *doctor) etcd(ctx context.Context) error {
	hosts, err := d.hosts("2379")
	if err != nil {
		return err
	}
	cfg := clientv3.Config{Endpoints: hosts, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), Context: ctx}
	if d.u.User != nil {
		cfg.Username = d.u.User.Username()
		cfg.Password, _ = d.u.User.Password()
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return err
	}
	defer cli.Close()
	d.info("clock.skew", "etcd reports no server time: doctor cannot measure the clock skew (run NTP on every host)")

	members, err := cli.MemberList(ctx)
	if err != nil {
		return err
	}
	n := len(members.Members)
	switch {
	case n%2 == 0:
		d.add("etcd.cluster-size", LevelWarning, fmt.Sprintf("%d members", n),
			"an even count tolerates no more failures than one member fewer, and a partition into halves leaves no majority: holds cannot be renewed on either side",
			"run 3 or 5 members")
	case n == 1:
		d.info("etcd.cluster-size", "1 member: no failover (a restart makes locks unavailable, not unsafe)")
	default:
		d.ok("etcd.cluster-size", fmt.Sprintf("%d members: tolerates %d failure(s)", n, (n-1)/2))
	}
	var rtt time.Duration
	var leaders = map[uint64]bool{}
	healthy := 0
	for _, m := range members.Members {
		if len(m.ClientURLs) == 0 {
			d.add("etcd.health", LevelWarning, fmt.Sprintf("member %s has no client URL (not started?)", m.Name), "", "")
			continue
		}
		ep := m.ClientURLs[0]
		before := time.Now()
		st, err := cli.Status(ctx, ep)
		took := time.Since(before)
		if err != nil {
			d.add("etcd.health", LevelWarning, fmt.Sprintf("member %s (%s) does not answer: %v", m.Name, ep, oneLine(err.Error())),
				"the cluster tolerates fewer further failures", "bring the member back, or replace it (etcdctl member remove/add)")
			continue
		}
		healthy++
		if rtt == 0 || took < rtt {
			rtt = took
		}
		leaders[st.Leader] = true
		if etcdLeaseBug(st.Version) {
			d.add("etcd.lease-bug-15247", LevelWarning, fmt.Sprintf("member %s runs etcd %s", m.Name, st.Version),
				"etcd before 3.4.25 / 3.5.8 lets a deposed leader renew leases (etcd issue 15247): a keepalive can be answered as if the lease were extended after the new leader let it expire. dlock counts a renewal only once a consensus response of the same raft term confirms it, so its own holds stay safe; other etcd clients, and dlock's margin on a leader change, are not. A warning, not broken, for that reason",
				"upgrade to etcd 3.4.25+, 3.5.8+ or 3.6")
		} else {
			d.ok("etcd.version", fmt.Sprintf("member %s runs etcd %s", m.Name, st.Version))
		}
		for _, e := range st.Errors {
			d.add("etcd.health", LevelWarning, fmt.Sprintf("member %s reports: %s", m.Name, e), "", "")
		}
	}
	if healthy == n {
		d.ok("etcd.health", fmt.Sprintf("all %d members answer", n))
	}
	if len(leaders) > 1 || leaders[0] {
		d.add("etcd.leader", LevelWarning, "members disagree on the leader, or one has none", "renewals fail until a leader is elected", "check the members' network and logs")
	}
	alarms, err := cli.AlarmList(ctx)
	switch {
	case err != nil:
		d.unknown("etcd.alarms", err)
	case len(alarms.Alarms) > 0:
		d.add("etcd.alarms", LevelBroken, fmt.Sprintf("%d alarm(s) raised, e.g. %v", len(alarms.Alarms), alarms.Alarms[0].Alarm),
			"a NOSPACE alarm makes etcd refuse writes: no lock can be acquired, and holds are lost",
			"compact and defragment (etcdctl compact, defrag), then etcdctl alarm disarm; turn on --auto-compaction-retention")
	default:
		d.ok("etcd.alarms", "no alarms")
	}
	d.etcdCompaction(ctx, cli)
	d.roundTrip("rtt", rtt)
	return nil
}

// etcdCompaction tells whether history is compacted. etcd does not expose
// its --auto-compaction-* flags; a history that was never compacted at a
// large revision means it is off.
func (d *doctor) etcdCompaction(ctx context.Context, cli *clientv3.Client) {
	resp, err := cli.Get(ctx, "\x00dlock-doctor", clientv3.WithRev(1), clientv3.WithSerializable())
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		d.ok("etcd.compaction", "history has been compacted (auto-compaction or a scheduled compact is at work)")
	case err != nil:
		d.unknown("etcd.compaction", err)
	case resp.Header.Revision > 100_000:
		d.add("etcd.compaction", LevelWarning, fmt.Sprintf("revision %d and history never compacted: auto-compaction is off", resp.Header.Revision),
			"every lock acquire and release adds revisions; without compaction the database grows to its quota, then etcd raises NOSPACE and refuses writes: no lock can be acquired and holds are lost",
			"start etcd with --auto-compaction-mode=periodic --auto-compaction-retention=1h (or compact on a schedule)")
	default:
		d.info("etcd.compaction", fmt.Sprintf("revision %d, history not compacted yet: doctor cannot tell whether auto-compaction is on (etcd does not expose it)", resp.Header.Revision))
	}
}
