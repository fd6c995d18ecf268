package faults

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sync"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/fence"
)

// resourceKey is the one resource every worker increments.
const resourceKey = "counter"

// Resource is the shared counter the workers increment, served over HTTP on
// loopback, and the sink of every worker event. Fenced, it checks each read
// and write with a fence.Memory; unfenced, it accepts everything.
type Resource struct {
	fenced bool
	fence  fence.Memory

	mu sync.Mutex
	// In a read-write run: the highest writer and reader tokens accepted
	// (docs/rwmutex.md: a write needs at least both, a read at least the
	// writers').
	rwMu     sync.Mutex // held across a read-write check and its operation
	rwW, rwR dlock.Token
	value    int64
	values   map[string]int64 // a counter per permit key, in a semaphore run
	events   []Event
	waiters  []*waiter

	srv *http.Server
	ln  net.Listener
}

type waiter struct {
	match func(Event) bool
	ch    chan Event
}

// opRequest is a worker's read or write.
type opRequest struct {
	Worker  int    `json:"w"`
	Kind    string `json:"k"` // EvRead or EvWrite
	Key     string `json:"s"` // the permit's key; "" for the one counter
	Role    string `json:"o"` // in a read-write run, "r" (reader) or "w" (writer); else ""
	Token   uint64 `json:"t"`
	Value   int64  `json:"v"`
	Expires int64  `json:"x"`
}

type opReply struct {
	Value    int64 `json:"v"`
	Rejected bool  `json:"r"`
}

// StartResource serves a new Resource on a loopback port.
func StartResource(fenced bool) (*Resource, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Resource{fenced: fenced, ln: ln, values: map[string]int64{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /op", r.handleOp)
	mux.HandleFunc("POST /event", r.handleEvent)
	r.srv = &http.Server{Handler: mux}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// Addr is the resource's base URL.
func (r *Resource) Addr() string { return "http://" + r.ln.Addr().String() }

// Close stops serving.
func (r *Resource) Close() error { return r.srv.Close() }

func (r *Resource) handleOp(w http.ResponseWriter, req *http.Request) {
	var op opRequest
	if err := json.NewDecoder(req.Body).Decode(&op); err != nil || (op.Kind != EvRead && op.Kind != EvWrite) {
		http.Error(w, "bad op", http.StatusBadRequest)
		return
	}
	reply := r.apply(op)
	_ = json.NewEncoder(w).Encode(reply)
}

// apply runs one operation: under the fence when fenced, and records it.
func (r *Resource) apply(op opRequest) opReply {
	var reply opReply
	act := func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		v := &r.value
		if op.Key != "" && op.Role == "" {
			pv := r.values[op.Key]
			defer func() { r.values[op.Key] = pv }()
			v = &pv
		}
		if op.Kind == EvWrite {
			*v = op.Value
		}
		reply.Value = *v
		r.recordLocked(Event{Worker: op.Worker, Kind: op.Kind, Key: op.Key, Token: op.Token, Mono: Mono(), Expires: op.Expires, Value: *v})
		return nil
	}
	fenceKey := resourceKey
	if op.Key != "" {
		fenceKey = resourceKey + "/" + op.Key // tokens increase per permit
	}
	var err error
	if r.fenced && op.Role != "" {
		err = r.rwFence(op, act)
	} else if r.fenced {
		err = r.fence.Do(fenceKey, dlock.Token(op.Token), act)
	} else {
		err = act()
	}
	if err != nil {
		reply.Rejected = true
		r.record(Event{Worker: op.Worker, Kind: EvReject, Key: op.Key, Token: op.Token, Mono: Mono(), Expires: op.Expires, Err: err.Error()})
	}
	return reply
}

// rwFence runs act if op passes the read-write rule, and raises the mark
// of op's role: a writer's operation needs a token at least the highest
// of either kind, a reader's at least the highest writer's.
func (r *Resource) rwFence(op opRequest, act func() error) error {
	r.rwMu.Lock()
	defer r.rwMu.Unlock()
	tok := dlock.Token(op.Token)
	rule := fence.Rule{Resource: resourceKey, Highest: r.rwW}
	if op.Role == "w" {
		rule.Highest = max(r.rwW, r.rwR)
	}
	if err := rule.Check(tok); err != nil {
		return err
	}
	if op.Role == "w" {
		r.rwW = tok
	} else {
		r.rwR = max(r.rwR, tok)
	}
	return act()
}

func (r *Resource) handleEvent(w http.ResponseWriter, req *http.Request) {
	var e Event
	if err := json.NewDecoder(req.Body).Decode(&e); err != nil {
		http.Error(w, "bad event", http.StatusBadRequest)
		return
	}
	r.record(e)
	w.WriteHeader(http.StatusNoContent)
}

func (r *Resource) record(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recordLocked(e)
}

func (r *Resource) recordLocked(e Event) {
	r.events = append(r.events, e)
	keep := r.waiters[:0]
	for _, w := range r.waiters {
		if w.match(e) {
			w.ch <- e
			continue
		}
		keep = append(keep, w)
	}
	r.waiters = keep
}

// WaitFor returns the first event, already recorded or still to come, that
// matches, or an error when ctx ends first. match sees every event once, in
// the order recorded.
func (r *Resource) WaitFor(ctx context.Context, match func(Event) bool) (Event, error) {
	w := &waiter{match: match, ch: make(chan Event, 1)}
	r.mu.Lock()
	for _, e := range r.events {
		if match(e) {
			r.mu.Unlock()
			return e, nil
		}
	}
	r.waiters = append(r.waiters, w)
	r.mu.Unlock()
	select {
	case e := <-w.ch:
		return e, nil
	case <-ctx.Done():
		r.mu.Lock()
		for i, x := range r.waiters {
			if x == w {
				r.waiters = append(r.waiters[:i], r.waiters[i+1:]...)
				break
			}
		}
		r.mu.Unlock()
		select {
		case e := <-w.ch:
			return e, nil
		default:
		}
		return Event{}, errors.Join(errors.New("faults: event did not happen"), ctx.Err())
	}
}

// History returns what was recorded so far.
func (r *Resource) History(healed []int64) History {
	r.mu.Lock()
	defer r.mu.Unlock()
	finals := make(map[string]int64, len(r.values))
	for k, v := range r.values {
		finals[k] = v
	}
	return History{Events: append([]Event(nil), r.events...), Final: r.value, Finals: finals, Healed: healed}
}
