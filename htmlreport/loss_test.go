package htmlreport

import (
	"strings"
	"testing"

	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/report"
)

// TestPageSaysWhatTheLossAffected: the page's loss line names the kinds
// lost and the steps marked, as the summary does.
func TestPageSaysWhatTheLossAffected(t *testing.T) {
	l := report.Loss{Delivered: 900, RingbufFull: 100, ByKind: map[events.Kind]uint64{events.KindCall: 100},
		Steps: []report.LossSteps{{PID: 42, First: 17, Last: 21, N: 5}}}
	v := build(Report{Loss: &l}, NewCollector())
	for _, want := range []string{"100 lost (ring buffer full 100", "CUDA calls 100", "PID 42 steps 17-21 (5 marked)"} {
		if !strings.Contains(v.Loss, want) {
			t.Errorf("loss line %q lacks %q", v.Loss, want)
		}
	}
}
