package report

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/events"
)

// TestWriteLossSaysWhatTheLossAffected: kinds, spans (at most
// maxLossSpans, then a count) and steps.
func TestWriteLossSaysWhatTheLossAffected(t *testing.T) {
	at := time.Date(2026, 12, 2, 12, 0, 1, 0, time.UTC)
	l := Loss{Delivered: 900, RingbufFull: 100, ByKind: map[events.Kind]uint64{events.KindCall: 90, events.KindPyWait: 7},
		Steps: []LossSteps{{PID: 42, First: 17, Last: 21, N: 5}}}
	for i := range 7 {
		l.Spans = append(l.Spans, LossSpan{From: at.Add(time.Duration(i) * time.Second), To: at.Add(time.Duration(i)*time.Second + 500*time.Millisecond), Events: 1})
	}
	var b strings.Builder
	WriteLoss(&b, l)
	for _, want := range []string{
		"events: 900 delivered, 100 lost (ring buffer full 100, unreadable 0)",
		"events lost: 100 of 1000 (the ring buffer was full: gpuprof read too slowly): CUDA calls 90, Python waits 7, other 3\n",
		"  lost in: 12:00:01.000-12:00:01.500 (1), 12:00:02.000-12:00:02.500 (1), ",
		"12:00:05.000-12:00:05.500 (1), and 2 more\n",
		"  steps overlapping a loss, their numbers incomplete (lost_events in --jsonl): PID 42 steps 17-21 (5 marked)\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	WriteLoss(&b, Loss{Delivered: 10})
	if strings.Contains(b.String(), "events lost") {
		t.Errorf("nothing lost, yet:\n%s", b.String())
	}
	b.Reset()
	WriteLoss(&b, Loss{Delivered: 10, RingbufFull: 2, ByKind: map[events.Kind]uint64{events.KindCall: 2}})
	if !strings.Contains(b.String(), "  no step overlapped a loss\n") {
		t.Errorf("a loss with no step marked should say so:\n%s", b.String())
	}
}
