package lockctl

import (
	"math/rand/v2"
	"slices"
	"time"
)

// sampleCap bounds the latencies one goroutine keeps: past it, reservoir
// sampling keeps a uniform sample, so percentiles stay right in bounded
// memory however fast the backend is.
const sampleCap = 100_000

// sampler collects latencies of one goroutine.
type sampler struct {
	seen    int
	samples []time.Duration
	rng     *rand.Rand
}

func newSampler() *sampler {
	return &sampler{rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
}

func (s *sampler) add(d time.Duration) {
	s.seen++
	if len(s.samples) < sampleCap {
		s.samples = append(s.samples, d)
		return
	}
	if i := s.rng.IntN(s.seen); i < sampleCap {
		s.samples[i] = d
	}
}

// percentiles merges samplers and returns the p50 and p99, or zeros when
// there is no sample. Each sampler's sample is weighted by how many
// latencies it saw.
func percentiles(ss []*sampler) (p50, p99 time.Duration) {
	type w struct {
		d      time.Duration
		weight float64
	}
	var all []w
	var total float64
	for _, s := range ss {
		if len(s.samples) == 0 {
			continue
		}
		weight := float64(s.seen) / float64(len(s.samples))
		for _, d := range s.samples {
			all = append(all, w{d, weight})
		}
		total += float64(s.seen)
	}
	if len(all) == 0 {
		return 0, 0
	}
	slices.SortFunc(all, func(a, b w) int { return int(a.d - b.d) })
	at := func(q float64) time.Duration {
		target, acc := q*total, 0.0
		for _, x := range all {
			acc += x.weight
			if acc >= target {
				return x.d
			}
		}
		return all[len(all)-1].d
	}
	return at(0.50), at(0.99)
}
