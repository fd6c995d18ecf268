package dlockotel

// Bucket boundaries, in seconds, given to each histogram as advice
// (metric.WithExplicitBucketBoundaries), so that an SDK with no View of
// the program's own spreads the figures over buckets that fit them. The
// SDK's defaults (0, 5, 10, 25 ... 10000) are made for milliseconds: every
// wait and every renewal, recorded in seconds, would fall in the first.
var (
	// waitBuckets: the HTTP semantic conventions' request durations (5 ms
	// to 10 s), from 1 ms for an uncontended lock on a nearby server, and
	// on to 10 minutes for a Lock that waits behind a long hold.
	waitBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60, 120, 300, 600}
	// holdBuckets: from a few milliseconds of critical section to a leader
	// that holds for a day.
	holdBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400}
	// renewalBuckets: one request's round trip, as waitBuckets up to 10 s
	// (a renewal slower than that has used up most of a 30 s lease).
	renewalBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
	// marginBuckets: the validity left at a renewal, up to a lease of 30 s
	// (dlock.DefaultTTL: two thirds of it, 20 s, when all is well) and on
	// for longer leases; fine near zero, where a loss comes from.
	marginBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 25, 30, 60, 120, 300}
)
