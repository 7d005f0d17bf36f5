package correlate

import (
	"math"
	"testing"

	"github.com/gpuprof/gpuprof/events"
)

func recordCall(t *testing.T, tid uint32, at, handle uint64) events.Event {
	t.Helper()
	a := apiNamed(t, "cuEventRecord")
	return events.Event{Kind: events.KindCall, API: a.ID, PID: 7, TID: tid, Start: at, End: at, Args: [5]uint64{handle}}
}

// TestLearningBufferBounded: a process whose steps are never found (one
// thread recording events, no launch, no boundary) holds at most
// MaxBuffer events however many come, and counts the rest dropped.
func TestLearningBufferBounded(t *testing.T) {
	const max, n = 1000, 100000
	c, err := New(Config{MaxBuffer: max})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		ev := recordCall(t, 8, uint64(i)*10*us, 0xe1)
		c.Add(&ev)
		if len(c.buf) > max+1 {
			t.Fatalf("after %d events %d held, want at most %d", i+1, len(c.buf), max+1)
		}
	}
	if _, ok := c.Boundary(); ok {
		t.Fatal("a boundary found in records alone: the test holds nothing back")
	}
	if cap(c.buf) > 2*(max+1) {
		t.Errorf("buffer capacity %d, want at most %d", cap(c.buf), 2*(max+1))
	}
	d := c.Dropped()
	if d.Buffer+uint64(len(c.buf)) != n {
		t.Errorf("%d dropped + %d held = %d, want the %d added", d.Buffer, len(c.buf), d.Buffer+uint64(len(c.buf)), n)
	}
	if got := c.Summary().Dropped; got != d || !got.Any() {
		t.Errorf("Summary().Dropped %+v, want %+v", got, d)
	}
}

// TestHandlesBounded: a job recording ever new CUDA events does not grow
// the records remembered past maxHandles; those forgotten are counted.
func TestHandlesBounded(t *testing.T) {
	const n = 3*maxHandles + 5
	c, err := New(Config{MaxBuffer: 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		ev := recordCall(t, 8, uint64(i)*us, uint64(0x1000+i))
		c.Add(&ev)
		if len(c.records) > maxHandles {
			t.Fatalf("after %d records %d remembered, want at most %d", i+1, len(c.records), maxHandles)
		}
	}
	if d := c.Dropped(); d.Handles+uint64(len(c.records)) != n {
		t.Errorf("%d forgotten + %d remembered, want the %d recorded", d.Handles, len(c.records), n)
	}
}

// TestSeriesBounded: past seriesCap values a series keeps seriesCap, a
// uniform sample: its count and mean stay exact, its quantiles near.
func TestSeriesBounded(t *testing.T) {
	const n = 5 * seriesCap
	var s series
	for i := range n {
		s.add(float64(i))
	}
	if len(s.kept) != seriesCap || s.dropped() != n-seriesCap {
		t.Fatalf("kept %d, dropped %d; want %d and %d", len(s.kept), s.dropped(), seriesCap, n-seriesCap)
	}
	d := s.dist()
	if d.N != n || d.Mean != float64(n-1)/2 {
		t.Errorf("N %d mean %g, want %d and %g", d.N, d.Mean, n, float64(n-1)/2)
	}
	for _, q := range []struct{ got, want float64 }{{d.P10, 0.1 * n}, {d.P50, 0.5 * n}, {d.P90, 0.9 * n}} {
		if math.Abs(q.got-q.want) > 0.02*n {
			t.Errorf("quantile %g, want %g within 2%% of the range", q.got, q.want)
		}
	}
	// Under the cap a series is every value: the quantiles are exact.
	var small series
	for i := range 11 {
		small.add(float64(i))
	}
	if d := small.dist(); d.P50 != 5 || d.P10 != 1 || d.P90 != 9 || d.N != 11 || small.dropped() != 0 {
		t.Errorf("small series %+v", d)
	}
}

// TestSetMaxBuffer: lowering the bound drops the oldest events held, and
// counts them.
func TestSetMaxBuffer(t *testing.T) {
	c, err := New(Config{MaxBuffer: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 900 {
		ev := recordCall(t, 8, uint64(i)*10*us, 0xe1)
		c.Add(&ev)
	}
	c.SetMaxBuffer(100)
	if len(c.buf) != 100 || c.Dropped().Buffer != 800 || c.buf[0].ev.End != 800*10*us {
		t.Errorf("held %d from %d, dropped %d; want the newest 100, 800 dropped", len(c.buf), c.buf[0].ev.End, c.Dropped().Buffer)
	}
}

// TestThreadRowsBounded: a process starting a new thread for every call
// keeps maxThreadRows thread rows; the rest of its calls are counted in
// its TID 0 row, none lost.
func TestThreadRowsBounded(t *testing.T) {
	const n = 3 * maxThreadRows
	c, err := New(Config{MaxBuffer: 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		ev := recordCall(t, uint32(100+i), uint64(i)*us, 0xe1)
		c.Add(&ev)
	}
	s := c.Summary()
	calls := uint64(0)
	var other *ThreadTotals
	for i, th := range s.Threads {
		calls += th.Calls
		if th.TID == 0 {
			other = &s.Threads[i]
		}
	}
	if len(s.Threads) > maxThreadRows+1 || other == nil || calls != n {
		t.Fatalf("%d thread rows (TID 0: %+v), %d calls in them; want at most %d rows holding all %d", len(s.Threads), other, calls, maxThreadRows+1, n)
	}
	if s.Dropped.ThreadEvents != other.Calls {
		t.Errorf("Dropped.ThreadEvents %d, TID 0 row %d calls", s.Dropped.ThreadEvents, other.Calls)
	}
}
