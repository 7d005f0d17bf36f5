package validate

import "testing"

// TestCompareMeans: the means of matched steps, where the median passes
// over a minority of steps that are off; Compare's medians are unchanged.
func TestCompareMeans(t *testing.T) {
	var truth, ours []Row
	for i := 0; i < 10; i++ {
		s := uint64(i) * 100
		truth = append(truth, Row{Step: i, Start: s, End: s + 100, Fields: map[string]float64{"data_time": 40e-9}})
		data := 40e-9
		if i%4 == 0 { // three steps of ten: data time doubled
			data = 80e-9
		}
		ours = append(ours, Row{Step: i, Start: s, End: s + 100, Fields: map[string]float64{"data_time": data}})
	}
	med := Compare(truth, ours, 0, 0.05, []string{"data_time"})
	avg := CompareMeans(truth, ours, 0, 0.05, []string{"data_time"})
	if !med.Pass() {
		t.Fatalf("medians: %+v", med)
	}
	if avg.Pass() || !avg.OneToOne {
		t.Fatalf("means passed over three steps of ten at twice the time: %+v", avg)
	}
	for _, f := range avg.Fields {
		if f.Name == "data_time" && (f.Truth < 39.9e-9 || f.Truth > 40.1e-9 || f.Ours < 51.9e-9 || f.Ours > 52.1e-9) {
			t.Errorf("mean data_time: truth %g, ours %g, want 40e-9 and 52e-9", f.Truth, f.Ours)
		}
	}
}
