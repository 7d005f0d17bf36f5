package probes

import (
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf/link"
)

// closeOrder records the closes of fake links.
type closeOrder struct {
	mu      sync.Mutex
	entries int // entries closed
	errs    []string
}

// fakeLink is a link whose Close says what was closed before it.
type fakeLink struct {
	link.Link
	o       *closeOrder
	entry   bool
	all     int           // entries there are
	arrived chan struct{} // one send an entry's Close
}

func (l fakeLink) Close() error {
	o := l.o
	if !l.entry {
		o.mu.Lock()
		if o.entries != l.all {
			o.errs = append(o.errs, "a return probe closed before every entry probe was")
		}
		o.mu.Unlock()
		return nil
	}
	l.arrived <- struct{}{}
	// Every entry must be closing at once: each waits for the others.
	deadline := time.After(2 * time.Second)
	for {
		o.mu.Lock()
		if len(l.arrived) == l.all {
			o.entries++
			o.mu.Unlock()
			return nil
		}
		o.mu.Unlock()
		select {
		case <-deadline:
			o.mu.Lock()
			o.errs = append(o.errs, "entry probes closed one after another, not at once")
			o.entries++
			o.mu.Unlock()
			return nil
		case <-time.After(time.Millisecond):
		}
	}
}

// TestCloseLinksInWaves: the entry probes close all at once, and the
// return probes only after every one of them.
func TestCloseLinksInWaves(t *testing.T) {
	const pairs = 5
	o := &closeOrder{}
	arrived := make(chan struct{}, pairs)
	var links []link.Link
	for range pairs {
		links = append(links, fakeLink{o: o, entry: true, all: pairs, arrived: arrived},
			returnLink{fakeLink{o: o, all: pairs}})
	}
	if err := closeLinks(links); err != nil {
		t.Fatal(err)
	}
	if o.entries != pairs || len(o.errs) != 0 {
		t.Errorf("%d of %d entry probes closed: %v", o.entries, pairs, o.errs)
	}
}
