package zookeeper

import (
	"testing"
	"time"
)

// drain waits for the requests in flight, and admits none after it began.
func TestFlightsDrain(t *testing.T) {
	var f flights
	for range 2 {
		if !f.enter() {
			t.Fatal("enter refused before drain")
		}
	}
	done := make(chan bool, 1)
	go func() { done <- f.drain(time.Minute) }()
	// drain is waiting once enter is refused.
	for f.enter() {
		f.leave()
		time.Sleep(time.Millisecond)
	}
	f.leave()
	select {
	case <-done:
		t.Fatal("drain returned with a request still in flight")
	case <-time.After(20 * time.Millisecond):
	}
	f.leave()
	if ok := <-done; !ok {
		t.Fatal("drain reported requests left after the last one left")
	}
	var g flights
	g.enter()
	if g.drain(10 * time.Millisecond) {
		t.Fatal("drain reported none left while one never left")
	}
	if g.enter() {
		t.Fatal("enter admitted after drain")
	}
}
