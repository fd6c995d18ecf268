package benchpeers

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"
)

// ScenPaired is the uncontended Lock+Unlock of a dlock system (or of the
// fenced reference lock) and of one of its peers (peerOf) in alternating
// blocks on one goroutine: both see
// the same moments of the machine and of the server, so a slow second
// (another process, a disk sync that took longer) slows both, and their
// ratio is taken block against block. The separate uncontended runs are
// seconds apart, and on a store bound by a disk sync their ratio moved by
// a fifth between runs of the same code.
const ScenPaired = "uncontended-paired"

// pairBlock is how long one side of a pair runs before the other takes
// over: long enough for some fifty cycles on a store with a disk sync in
// each write (so that the first cycles after a switch, on a connection
// idle for a block, weigh little), short enough that the load seldom
// changes within a pair of blocks.
const pairBlock = 100 * time.Millisecond

// pair is a dlock system and a peer it is compared with.
type pair struct{ dlock, peer system }

// pairs returns, in report order, each selected system with each selected
// peer peerOf names for it.
func pairs(syss []system) []pair {
	var out []pair
	for _, d := range syss {
		for _, peer := range peerOf[d.name] {
			if i := slices.IndexFunc(syss, func(s system) bool { return s.name == peer }); i >= 0 {
				out = append(out, pair{d, syss[i]})
			}
		}
	}
	return out
}

// runPaired runs p's two systems for cfg.Duration each, in alternating
// blocks of pairBlock, each with its own client and key: block i of the
// dlock system and block i of the peer make a pair, the order within a
// pair alternating (dlock first, then the peer first), so that a load
// rising or falling through a pair does not favour one side. Each pair
// gives one ratio, the dlock system's acquisitions per second over the
// peer's.
func runPaired(ctx context.Context, cfg Config, p pair) Result {
	r := Result{Scenario: ScenPaired, System: p.dlock.name, Peer: p.peer.name, Reps: 1}
	key := fmt.Sprintf("%s-%d", ScenPaired, time.Now().UnixNano())
	var sides [2]client
	for i, s := range []system{p.dlock, p.peer} {
		c, err := s.open(ctx, cfg.Endpoints, 0)
		if err != nil {
			r.Error = s.name + ": open: " + err.Error()
			return r
		}
		defer c.close()
		if err := lockUnlock(ctx, c, key+"-"+fmt.Sprint(i)); err != nil {
			r.Error = s.name + ": warm-up: " + err.Error()
			return r
		}
		sides[i] = c
	}
	var (
		n     [2]int64
		spent [2]time.Duration
	)
	block := func(i int) (float64, error) {
		start := time.Now()
		var cycles int64
		for cycles == 0 || time.Since(start) < pairBlock {
			if err := lockUnlock(ctx, sides[i], key+"-"+fmt.Sprint(i)); err != nil {
				return 0, err
			}
			cycles++
		}
		el := time.Since(start)
		n[i] += cycles
		spent[i] += el
		return float64(cycles) / el.Seconds(), nil
	}
	for b := 0; spent[0] < cfg.Duration || spent[1] < cfg.Duration; b++ {
		order := [2]int{0, 1}
		if b%2 == 1 {
			order = [2]int{1, 0}
		}
		var rate [2]float64
		for _, i := range order {
			v, err := block(i)
			if err != nil {
				r.Error = []string{p.dlock.name, p.peer.name}[i] + ": " + err.Error()
				return r
			}
			rate[i] = v
		}
		r.BlockRatios = append(r.BlockRatios, rate[0]/rate[1])
	}
	r.Acquisitions, r.Seconds = n[0], spent[0].Seconds()
	r.AcqPerSec = float64(n[0]) / spent[0].Seconds()
	r.PeerAcqPerSec = float64(n[1]) / spent[1].Seconds()
	return r
}

// pairedRatio is a paired result's ratio, the median of its blocks' (0
// when it has none), and the quartiles around it.
func pairedRatio(r *Result) (med, lo, hi float64) {
	if r == nil || len(r.BlockRatios) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(r.BlockRatios)
	slices.Sort(s)
	q := func(p float64) float64 { // linear between the nearest two
		pos := p * float64(len(s)-1)
		i := int(pos)
		if i+1 >= len(s) {
			return s[i]
		}
		return s[i] + (pos-float64(i))*(s[i+1]-s[i])
	}
	return median(s), q(0.25), q(0.75)
}

// findPaired returns the paired result of dlock system d against peer.
func findPaired(rs []Result, d, peer string) *Result {
	for i := range rs {
		if rs[i].Scenario == ScenPaired && rs[i].System == d && rs[i].Peer == peer {
			return &rs[i]
		}
	}
	return nil
}

// writePaired writes the paired table: per pair, both rates over all
// their blocks, and the median and quartiles of the blocks' ratios.
func writePaired(w io.Writer, cfg Config, rs []Result) {
	if !cfg.wants(ScenPaired) || !slices.ContainsFunc(rs, func(r Result) bool { return r.Scenario == ScenPaired }) {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("## %s (one goroutine, Lock+Unlock of a system and of its peer in alternating %v blocks; %v each per run)\n\n",
		ScenPaired, pairBlock, cfg.Duration)
	p("Each pair of blocks gives the ratio of the system's acquisitions per second to the peer's; the order within\n")
	p("a pair alternates. The ratio is the median over the pairs of every repetition, with its quartiles: a figure\n")
	p("that moves little with the machine's load, unlike the ratio of two runs taken seconds apart.\n\n")
	p("| system | peer | system acq/s | peer acq/s | ratio | quartiles | pairs | error |\n|---|---|--:|--:|--:|--:|--:|---|\n")
	for i := range rs {
		r := &rs[i]
		if r.Scenario != ScenPaired {
			continue
		}
		med, lo, hi := pairedRatio(r)
		p("| %s | %s | %.0f | %.0f | %.3fx | %.3f-%.3f | %d | %s |\n", r.System, r.Peer, r.AcqPerSec, r.PeerAcqPerSec,
			med, lo, hi, len(r.BlockRatios), r.Error)
	}
	p("\n")
}
