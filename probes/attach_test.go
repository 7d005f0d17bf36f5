package probes

import (
	"testing"
)

// TestAttachReturnsBeforeEntries: a library's return probes are attached
// before its entry probes (callPrograms), so that no call is entered with
// its entry seen and its return not: at the attach, such a runtime call
// was lost with the driver calls under it.
func TestAttachReturnsBeforeEntries(t *testing.T) {
	s := openSession(t)
	d := startDemo(t, "--steps", "100", "--start-delay", "0.3")
	waitForFile(t, d.PID(), "libcuda.so.1")
	plans := planFor(t, d.PID(), func(Probe) bool { return true })
	if len(plans) != 2 {
		t.Fatalf("%d CUDA libraries planned, want the runtime and the driver", len(plans))
	}
	for _, lp := range plans {
		links, err := attachPrograms(s.objs, d.PID(), lp, callPrograms...)
		if err != nil {
			t.Fatal(err)
		}
		order := make([]string, len(links))
		firstEntry, lastReturn := -1, -1
		for i, l := range links {
			order[i] = "entry"
			if _, ok := l.(returnLink); ok {
				order[i], lastReturn = "return", i
			} else if firstEntry < 0 {
				firstEntry = i
			}
		}
		if err := closeLinks(links); err != nil {
			t.Fatal(err)
		}
		if firstEntry < 0 || lastReturn < 0 || lastReturn > firstEntry {
			t.Errorf("%s: links attached in the order %v; want every return probe before the first entry probe", lp.File.Base(), order)
		}
	}
}
