package control

import (
	"testing"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// TestJobBufferShared: processes that never show a step (event records
// alone) hold jobBuffer events between them at most, however many there
// are; each held the newest of its own, the rest counted dropped.
func TestJobBufferShared(t *testing.T) {
	const procs, each = 200, 8000
	rec, _ := cudaapi.ByName("cuEventRecord")
	f := &fakeProbes{}
	l, err := New(DefaultConfig(), nil, f)
	if err != nil {
		t.Fatal(err)
	}
	for i := range each {
		for p := range uint32(procs) {
			at := uint64(i)*10e3 + uint64(p)
			l.Add(&events.Event{Kind: events.KindCall, API: rec.ID, PID: 1000 + p, TID: 1000 + p, Start: at, End: at, Args: [5]uint64{0xe1}})
		}
	}
	share := max(minProcBuffer, jobBuffer/procs)
	held := 0
	for p := range uint32(procs) {
		d := l.Summary(1000 + p).Dropped
		h := each - int(d.Buffer)
		if h > share+1 {
			t.Fatalf("PID %d holds %d events, want its share %d at most", 1000+p, h, share)
		}
		held += h
	}
	if held > jobBuffer+procs || held < jobBuffer/4 {
		t.Errorf("the job's processes hold %d events, want at most %d (and a share each)", held, jobBuffer)
	}
}
