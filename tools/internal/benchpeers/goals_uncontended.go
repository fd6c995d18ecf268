package benchpeers

import "fmt"

// Goal 3's floors: dlock's uncontended acquisitions per second over its
// peer's, paired, and on parallel keys.
const (
	redisFloor    = 0.90
	zkFloor       = 0.95
	etcdFloor     = 0.95
	redlockFloor  = 0.95
	parallelFloor = 0.90
	// clientCeiling bounds dlock redis://'s client CPU and allocations
	// per Lock+Unlock on parallel keys, over bsm/redislock's.
	clientCeiling = 1.5
)

// tokenCost is why a Redis lock with fencing tokens costs more server work
// than SET NX PX, with the figures of d and its peer b.
func tokenCost(d, b *Result) string {
	return fmt.Sprintf("The same round trips (%s against %s), but %s server commands per Lock+Unlock against %s, %s µs against %s: "+
		"the acquire reads the server clock and the fencing counter, checks the wait queue, and writes the counter (tokens that never "+
		"repeat, even after a failover or a restore), the lock and its description (Inspect). That is the price of such tokens, "+
		"of the queue (goals 1 and 2) and of the description.",
		fnum(d.RTPerAcq, 2), fnum(b.RTPerAcq, 2), fnum(d.CmdsPerAcq, 1), fnum(b.CmdsPerAcq, 1), fnum(d.UsecPerAcq, 1), fnum(b.UsecPerAcq, 1))
}

// redisCost is tokenCost for dlock redis:// against the bare lock, with
// the fenced reference lock of the same run when it ran: it splits the gap
// into what a fencing token alone costs (the fenced lock against the bare
// one) and what dlock does beyond that token (dlock against the fenced
// lock), both paired.
func redisCost(rs []Result) func(d, b, pr *Result) string {
	return func(d, b, _ *Result) string {
		f := find(rs, ScenUncontended, sysFenced, 0, "")
		fb, df := findPaired(rs, sysFenced, sysBare), findPaired(rs, sysRedis, sysFenced)
		if f == nil || fb == nil || df == nil || len(fb.BlockRatios) == 0 || len(df.BlockRatios) == 0 {
			return tokenCost(d, b)
		}
		fbm, fbl, fbh := pairedRatio(fb)
		dfm, dfl, dfh := pairedRatio(df)
		return fmt.Sprintf("A fencing token alone costs little: the bare lock with an INCR of a counter in the same script (%s) ran at "+
			"%.2fx the bare lock, paired (quartiles %.2f-%.2f). dlock ran at %.2fx that lock, paired (quartiles %.2f-%.2f): the "+
			"same round trips (%s against %s), but %s server commands per Lock+Unlock against %s (bare: %s), %s µs against %s (bare: %s), "+
			"every command a call from Lua into Redis. The acquire reads the server clock and sets the counter to at least it, so "+
			"that tokens never repeat, even after a failover or a restore from an older snapshot (a counter alone repeats them); it "+
			"checks the wait queue (goals 1 and 2) and writes the holder's description (Inspect); the release checks the queue to wake "+
			"its first waiter. Those promises, not the token, are the gap.",
			sysFenced, fbm, fbl, fbh, dfm, dfl, dfh, fnum(d.RTPerAcq, 2), fnum(f.RTPerAcq, 2),
			fnum(d.CmdsPerAcq, 1), fnum(f.CmdsPerAcq, 1), fnum(b.CmdsPerAcq, 1), fnum(d.UsecPerAcq, 1), fnum(f.UsecPerAcq, 1), fnum(b.UsecPerAcq, 1))
	}
}

// cycleGap is the time a Lock+Unlock of d takes beyond one of b, and d's
// cycle, in µs: from the paired blocks when the run has them, from the
// separate runs otherwise.
func cycleGap(d, b, pr *Result) (gap, cycle float64) {
	if pr != nil && pr.AcqPerSec > 0 && pr.PeerAcqPerSec > 0 {
		return 1e6/pr.AcqPerSec - 1e6/pr.PeerAcqPerSec, 1e6 / pr.AcqPerSec
	}
	if d.AcqPerSec <= 0 || b.AcqPerSec <= 0 {
		return 0, 0
	}
	return 1e6/d.AcqPerSec - 1e6/b.AcqPerSec, 1e6 / d.AcqPerSec
}

// uncontended checks goal 3: the uncontended floors beside each peer and
// the parallel-keys floor on Redis. A ratio of acquisitions per second is
// the paired one (ScenPaired) when the run has it, the separate runs'
// ratio otherwise; the reasons quote the separate runs' counts.
func uncontended(gs *goals, run goalRun) {
	rs := run.rs
	unc := func(label, dl, peer string, min float64, why func(d, b, pr *Result) string) {
		d, b := find(rs, ScenUncontended, dl, 0, ""), find(rs, ScenUncontended, peer, 0, "")
		what := fmt.Sprintf("3 uncontended: %s >= %.2fx %s", label, min, peer)
		if pr := findPaired(rs, dl, peer); pr != nil && pr.Error == "" && len(pr.BlockRatios) > 0 {
			med, lo, hi := pairedRatio(pr)
			measured := fmt.Sprintf("%.2fx paired (quartiles %.2f-%.2f)", med, lo, hi)
			reason := fmt.Sprintf("Paired blocks of both: %.0f against %.0f acquisitions/s.", pr.AcqPerSec, pr.PeerAcqPerSec)
			if d != nil && b != nil {
				measured += "; " + ratio(d.AcqPerSec, b.AcqPerSec) + " in separate runs"
				reason = why(d, b, pr)
			}
			gs.add(what, measured, med >= min, true, reason)
			return
		}
		if d == nil || b == nil || d.Error != "" || b.Error != "" || b.AcqPerSec <= 0 {
			gs.add(what, "n/a", false, false, "")
			return
		}
		gs.add(what, ratio(d.AcqPerSec, b.AcqPerSec)+" in separate runs (no paired run)", d.AcqPerSec >= min*b.AcqPerSec, true, why(d, b, nil))
	}
	token := func(d, b, _ *Result) string { return tokenCost(d, b) }
	unc("Redis", sysRedis, sysBare, redisFloor, redisCost(rs))
	unc("ZooKeeper", sysZK, sysZKLock, zkFloor, func(d, b, pr *Result) string {
		gap, cycle := cycleGap(d, b, pr)
		return fmt.Sprintf("%s packets per Lock+Unlock against %s, in the same round trips: the fencing token. go-zookeeper's Create "+
			"does not return the create's zxid, so the node's czxid takes an exists request on the new node (with a watch: the loss "+
			"signal zk.Lock does not have), sent alongside the listing. The gap is %.0f µs on a cycle of %.0f µs; what ZooKeeper "+
			"takes to serve that request is measured by go test -run '^$' -bench TokenRead ./backend/zookeeper/ (token-us/op). "+
			"Wait p50 %.2f against %.2f ms.", fnum(d.CmdsPerAcq, 1), fnum(b.CmdsPerAcq, 1), gap, cycle, d.WaitP50, b.WaitP50)
	})
	unc("etcd", sysEtcd, sysEtcdMutex, etcdFloor, func(d, b, pr *Result) string {
		gap, cycle := cycleGap(d, b, pr)
		return fmt.Sprintf("Not a request more: %s server requests per Lock+Unlock, as concurrency.Mutex (%s): a transaction that "+
			"queues the entry and reads its predecessor, and a delete. The gap is %.0f µs on a cycle of %.0f µs, most of which "+
			"is etcd's disk sync. The delete is the difference: ours is a transaction guarded by the entry's create revision, "+
			"concurrency.Mutex's a plain Delete, and etcd serves the guarded one slower (go test -run '^$' -bench GuardedDelete "+
			"./backend/etcd/, guard-us/op). Entries are named by their lease, which the Locker's next Lock of the key reuses: "+
			"the guard keeps a delete sent again after a timeout from removing that later entry. The rest is client work around "+
			"the two requests (go test -bench 'VsConcurrency/Uncontended' -benchmem ./backend/etcd/).",
			fnum(d.CmdsPerAcq, 1), fnum(b.CmdsPerAcq, 1), gap, cycle)
	})
	unc("Redlock", sysRedlock, sysRedsyncRL, redlockFloor, token)
	clientCost(gs, rs)

	what := fmt.Sprintf("3 parallel-keys: Redis >= %.2fx %s", parallelFloor, sysBare)
	d, b := find(rs, ScenParallel, sysRedis, 0, ""), find(rs, ScenParallel, sysBare, 0, "")
	if d == nil || b == nil || d.Error != "" || b.Error != "" || b.AcqPerSec <= 0 {
		gs.add(what, "n/a", false, false, "")
		return
	}
	gs.add(what, ratio(d.AcqPerSec, b.AcqPerSec), d.AcqPerSec >= parallelFloor*b.AcqPerSec, true,
		fmt.Sprintf("%d goroutines on one client, a key each, wait p99 %.2f against %.2f ms. ", run.cfg.Parallel, d.WaitP99, b.WaitP99)+tokenCost(d, b))
}

// clientCost checks goal 3's client side: on parallel keys, dlock redis://
// spends at most clientCeiling times bsm/redislock's client CPU and heap
// allocations per Lock+Unlock, both measured in the process running the
// loop (clients and library included).
func clientCost(gs *goals, rs []Result) {
	what := fmt.Sprintf("3 parallel-keys: Redis client CPU and allocations per Lock+Unlock <= %.1fx %s", clientCeiling, sysRedislock)
	d, b := find(rs, ScenParallel, sysRedis, 0, ""), find(rs, ScenParallel, sysRedislock, 0, "")
	if d == nil || b == nil || d.Error != "" || b.Error != "" || d.ClientCPU == nil || b.ClientCPU == nil ||
		d.Allocs == nil || b.Allocs == nil || *b.ClientCPU <= 0 || *b.Allocs <= 0 {
		gs.add(what, "n/a", false, false, "")
		return
	}
	cpu, allocs := *d.ClientCPU / *b.ClientCPU, *d.Allocs / *b.Allocs
	measured := fmt.Sprintf("CPU %.1f against %.1f µs (%.2fx), allocations %.1f against %.1f (%.2fx)",
		*d.ClientCPU, *b.ClientCPU, cpu, *d.Allocs, *b.Allocs, allocs)
	var why string
	if cpu > clientCeiling || allocs > clientCeiling {
		why = fmt.Sprintf("Per Lock+Unlock, %s B against %s B allocated. redislock's Obtain and Release are two plain script "+
			"calls on one key; dlock's are two scripts on six keys (the lock, its fencing counter, its description, the wait queue, "+
			"its deadlines, the release channel), and each call derives a context that ends with the Locker as well as with the caller's.",
			fnum(d.AllocBytes, 0), fnum(b.AllocBytes, 0))
	}
	gs.add(what, measured, cpu <= clientCeiling && allocs <= clientCeiling, true, why)
}
