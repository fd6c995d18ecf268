package linger

import (
	"context"
	"testing"
	"time"
)

// The context ends grace after its parent, not with it, and stop ends it
// at once.
func TestAfter(t *testing.T) {
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), t, "v"))
	l, stop := After(parent, 500*time.Millisecond)
	defer stop()
	if l.Value(t) != "v" {
		t.Fatal("lost its parent's values")
	}
	cancel()
	select {
	case <-l.Done():
		t.Fatal("ended with its parent, not grace after")
	case <-time.After(10 * time.Millisecond):
	}
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("still running long after the grace")
	}

	l, stop = After(context.Background(), time.Hour)
	stop()
	select {
	case <-l.Done():
	default:
		t.Fatal("stop did not end it")
	}
}
