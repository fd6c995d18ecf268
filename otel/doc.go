// Package dlockotel turns the events of dlock's portable layer into
// OpenTelemetry metrics and spans, for every backend alike. It uses the
// OpenTelemetry API only (no SDK, no exporter: the program chooses those),
// and is a module of its own, so a program that does not want telemetry
// never has OpenTelemetry in its module graph.
//
//	obs, err := dlockotel.New() // the global MeterProvider and TracerProvider
//	if err != nil { ... }
//	locker, err := dlock.Open(ctx, url, dlock.WithObserver(obs))
//
// # Instruments
//
// Every instrument carries dlock.backend (the URL scheme); dlock.key only
// with WithKeyAttribute, since keys can be of unbounded cardinality.
//
//	dlock.lock.wait.duration     histogram, s   Lock/TryLock call to outcome; dlock.op (lock, trylock),
//	                                            dlock.outcome (acquired, not_acquired, canceled, error),
//	                                            error.type unless acquired
//	dlock.lock.hold.duration     histogram, s   acquisition to the end of the hold; dlock.end (unlocked, lost,
//	                                            max_hold)
//	dlock.lock.acquisitions      counter        holds granted
//	dlock.lock.held              up-down        holds now held
//	dlock.lock.renewals          counter        dlock.outcome (renewed, failed, lost, canceled), dlock.watchdog,
//	                                            error.type unless renewed
//	dlock.lock.renewal.duration  histogram, s   one renewal's round trip; error.type unless renewed
//	dlock.lock.renewal.margin    histogram, s   what was left of the validity window when a renewal
//	                                            succeeded: the early warning before a loss
//	dlock.lock.losses            counter        dlock.loss.cause (renewal_failed, backend_reported,
//	                                            expired_unrenewed, max_hold), error.type (lock_lost,
//	                                            max_hold_reached)
//
// A hold that reached its maximum duration (dlock.WithMaxHold) ends by
// design, not by a failure: it is counted with dlock.loss.cause max_hold
// and error.type max_hold_reached, and its duration with dlock.end
// max_hold, so that alerts on failures can leave it out. A minimum hold
// (dlock.WithMinHold) that keeps a key held past its Unlock is no loss:
// dlock.end unlocked.
//
// # Failures: error.type
//
// As the semantic conventions ask, every failed outcome carries error.type
// and a success carries none: dlock.lock.wait.duration with any outcome but
// acquired, dlock.lock.renewals and dlock.lock.renewal.duration with any
// outcome but renewed, and dlock.lock.losses. Its value is a short, stable
// name of the dlock sentinel error the failure matches (low cardinality:
// never the error's text), tried in this order:
//
//	max_hold_reached   dlock.ErrMaxHoldReached (the hold reached its maximum: a loss by design)
//	lock_lost          dlock.ErrLockLost (a loss; also wraps the backend's detail)
//	closed             dlock.ErrClosed
//	not_acquired       dlock.ErrNotAcquired (TryLock found the key held)
//	already_held       dlock.ErrAlreadyHeld
//	not_held           dlock.ErrNotHeld
//	unavailable        dlock.ErrUnavailable (the backend, or a quorum of it, did not answer)
//	invalid_key        dlock.ErrInvalidKey
//	invalid_option     dlock.ErrInvalidOption
//	deadline_exceeded  context.DeadlineExceeded
//	canceled           context.Canceled
//	_OTHER             none of these
//
// A call that was called off (dlock.outcome canceled: its caller's context
// ended, or Unlock cut a renewal short) is canceled or deadline_exceeded.
//
// # Buckets
//
// Each histogram advises its own bucket boundaries (in seconds), so an SDK
// with its default aggregation, and no View, spreads the figures over them
// (the SDK's own defaults, 0 to 10000, suit milliseconds: every figure here
// would fall in the first bucket). A View still overrides them.
//
//	dlock.lock.wait.duration     1 ms to 10 s as HTTP request durations, then 30 s to 10 min
//	dlock.lock.hold.duration     5 ms to 1 day
//	dlock.lock.renewal.duration  1 ms to 10 s
//	dlock.lock.renewal.margin    10 ms to 30 s (the default lease), then to 5 min
//
// # Spans
//
// dlock.Lock, dlock.TryLock, dlock.Unlock and dlock.Renew, with dlock.backend,
// dlock.outcome and dlock.token as attributes. Lock's wait shows as events
// (watch_set, woken, retried, queued). A renewal made by the watchdog is a
// span of its own (a new root, not a child of whatever request took the
// lock). Errors are recorded on the span with an Error status and
// error.type; a TryLock that finds the key held, or a Lock whose context
// ends while it waits, is an outcome, not an error.
package dlockotel
