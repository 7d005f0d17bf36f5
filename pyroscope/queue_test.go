package pyroscope

import (
	"fmt"
	"testing"
)

func TestQueueDropsOldest(t *testing.T) {
	q := queue{maxLen: 3, maxBytes: 1 << 20}
	var out []string
	for i := range 5 {
		for _, j := range q.push(&job{name: fmt.Sprint(i), data: make([]byte, 10)}) {
			out = append(out, j.name)
		}
	}
	if fmt.Sprint(out) != "[0 1]" || q.len() != 3 || q.peak != 3 || q.bytes != 30 {
		t.Fatalf("pushed out %v, %d left of %d bytes (peak %d); want [0 1], 3 of 30 (peak 3)", out, q.len(), q.bytes, q.peak)
	}
	for _, want := range []string{"2", "3", "4"} {
		if j := q.pop(); j == nil || j.name != want {
			t.Fatalf("pop = %v, want %s", j, want)
		}
	}
	if q.pop() != nil || q.bytes != 0 {
		t.Errorf("empty queue: pop not nil or %d bytes left", q.bytes)
	}
}

func TestQueueBoundsBytes(t *testing.T) {
	q := queue{maxLen: 100, maxBytes: 100}
	for i := range 10 {
		q.push(&job{name: fmt.Sprint(i), data: make([]byte, 30)})
		if q.bytes > 100 {
			t.Fatalf("after %d pushes %d bytes queued, over the bound of 100", i+1, q.bytes)
		}
	}
	if q.len() != 3 {
		t.Errorf("%d jobs of 30 bytes queued under 100 bytes, want 3", q.len())
	}
	// One job bigger than the bound alone is kept, not dropped.
	out := q.push(&job{name: "big", data: make([]byte, 500)})
	if len(out) != 3 || q.len() != 1 || q.jobs[0].name != "big" {
		t.Errorf("a job over the bound: %d pushed out, %d left; want 3 and the big one", len(out), q.len())
	}
}
