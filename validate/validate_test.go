package validate

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

func rows(starts ...uint64) []Row {
	var out []Row
	for i, s := range starts {
		out = append(out, Row{Step: i, Start: s, End: s + 8, Fields: map[string]float64{"step_time": 8e-9}})
	}
	return out
}

func TestAlignOneToOne(t *testing.T) {
	truth := rows(0, 10, 20, 30, 40, 50)
	// gpuprof's steps end a little after the truth's and start at the
	// previous end.
	var ours []Row
	for i := 1; i < len(truth); i++ {
		ours = append(ours, Row{Step: i - 1, Start: truth[i-1].End + 1, End: truth[i].End + 1,
			Fields: map[string]float64{"step_time": 10e-9}})
	}
	res := Compare(truth, ours, 0, 0.05, []string{"period"})
	if !res.OneToOne || res.Matched != 5 || !res.Pass() {
		t.Fatalf("%+v", res)
	}
	// A step gpuprof merged (two truth steps in one) breaks one to one.
	merged := append([]Row{}, ours[:2]...)
	merged = append(merged, Row{Step: 2, Start: ours[2].Start, End: ours[3].End})
	if res := Compare(truth, merged, 0, 0.05, nil); res.OneToOne {
		t.Fatalf("merged steps passed as one to one: %+v", res)
	}
	// A step gpuprof cut in two (one cut in the middle of a truth step)
	// breaks it too: only one half can match.
	split := append([]Row{}, ours[:2]...)
	split = append(split, Row{Step: 2, Start: ours[2].Start, End: ours[2].Start + 5}, Row{Step: 3, Start: ours[2].Start + 5, End: ours[2].End})
	split = append(split, ours[3:]...)
	if res := Compare(truth, split, 0, 0.05, nil); res.OneToOne || res.Matched != 5 {
		t.Fatalf("a split step passed as one to one: %+v", res)
	}
	// A step that ended late (the loop preempted before it took its end
	// time) still matches, up to half a step.
	late := append([]Row{}, ours...)
	late[2].End = truth[3].End - 4
	if res := Compare(truth, late, 0, 0.05, nil); !res.OneToOne {
		t.Fatalf("a step 4 of 10 ns off its log's end did not match: %+v", res)
	}
	// Later than half a step, it matches only inside the lead-in of our
	// next step (the loop's bookkeeping after the boundary).
	preempted := append([]Row{}, truth...)
	preempted[3].End = ours[2].End + 6 // 6 ns late in an 8 ns step
	preempted[3].Start = preempted[3].End - 8
	if res := Compare(preempted, ours, 0, 0.05, nil); res.OneToOne {
		t.Fatalf("a log end 6 ns past ours (an 8 ns step) matched with no lead-in: %+v", res)
	}
	led := append([]Row{}, ours...)
	led[3].Fields = map[string]float64{"step_time": 10e-9, "lead_in": 7e-9}
	if res := Compare(preempted, led, 0, 0.05, nil); !res.OneToOne || res.Matched != 5 {
		t.Fatalf("a log end inside our next step's 7 ns lead-in did not match: %+v", res)
	}
	// A required field absent from one side fails.
	if res := Compare(truth, ours, 0, 0.05, []string{"compute_time"}); res.Pass() {
		t.Fatal("missing required field passed")
	}
}

func TestReadJSONL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.jsonl")
	os.WriteFile(path, []byte(`{"step":3,"t_start_ns":1700000000000000001,"t_end_ns":1700000000000000009,"step_time":0.5,"tag":"x"}`+"\n\n"), 0o644)
	rs, err := ReadJSONL(path)
	if err != nil || len(rs) != 1 {
		t.Fatal(rs, err)
	}
	// Nanosecond stamps beyond float64's precision survive.
	if rs[0].Start != 1700000000000000001 || rs[0].End != 1700000000000000009 || rs[0].Fields["step_time"] != 0.5 || rs[0].Step != 3 {
		t.Fatalf("%+v", rs[0])
	}
	os.WriteFile(path, []byte(`{"step":1}`+"\n"), 0o644)
	if _, err := ReadJSONL(path); err == nil {
		t.Error("a line without t_end_ns read")
	}
}

// TestReadJSONLCutLastLine: a writer killed mid-line leaves a last line
// with no newline, left out; a bad line anywhere else is an error.
func TestReadJSONLCutLastLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.jsonl")
	whole := `{"step":1,"t_end_ns":10}` + "\n" + `{"step":2,"t_end_ns":20}` + "\n"
	os.WriteFile(path, []byte(whole+`{"step":3,"t_st`), 0o644)
	if rs, err := ReadJSONL(path); err != nil || len(rs) != 2 || rs[1].End != 20 {
		t.Fatalf("a cut last line: %+v, %v; want the 2 whole lines", rs, err)
	}
	os.WriteFile(path, []byte(whole+`{"step":3,"t_end_ns":30}`), 0o644)
	if rs, err := ReadJSONL(path); err != nil || len(rs) != 3 {
		t.Fatalf("a whole last line without its newline: %+v, %v; want 3 rows", rs, err)
	}
	os.WriteFile(path, []byte(`{"step":3,"t_st`+"\n"+whole), 0o644)
	if _, err := ReadJSONL(path); err == nil {
		t.Fatal("a bad line followed by others read without error")
	}
}

// TestOnlyOneRank keeps one rank's rows of a job's log, and the rows of a
// truth log that has no ranks.
func TestOnlyOneRank(t *testing.T) {
	log := []Row{
		{Step: 0, End: 1, Fields: map[string]float64{"rank": 0, "step_time": 1}},
		{Step: 0, End: 2, Fields: map[string]float64{"rank": 1, "step_time": 2}},
		{Step: 1, End: 3, Fields: map[string]float64{"step_time": 3}},
	}
	got := Only(log, "rank", 1, false)
	if len(got) != 1 || got[0].End != 2 {
		t.Fatalf("rank 1 of a ranked log: %+v", got)
	}
	if _, ok := got[0].Fields["rank"]; ok {
		t.Errorf("the rank label is still a field to compare: %+v", got[0])
	}
	got = Only(log, "rank", 0, true)
	if len(got) != 2 || got[0].End != 1 || got[1].End != 3 {
		t.Fatalf("rank 0 keeping unlabelled rows: %+v", got)
	}
}

// TestCompareLeavesOutStepsOutsideTheTruth: steps gpuprof cut while the
// job set up (before the truth's first step) are counted apart, not held
// against the match.
func TestCompareLeavesOutStepsOutsideTheTruth(t *testing.T) {
	truth := rows(100, 110, 120, 130, 140, 150, 160)
	setup := []Row{{Step: 0, Start: 10, End: 40, Fields: map[string]float64{"step_time": 30e-9}}}
	ours := append(setup, rows(100, 110, 120, 130, 140, 150, 160)...)
	res := Compare(truth, ours, 0, 0.05, []string{"step_time"})
	if res.Outside != 1 || res.Ours != 7 || !res.OneToOne {
		t.Fatalf("%+v: want the set-up step left out and the rest one to one", res)
	}
}

// TestPoolWithinOneItem: a small pool's median read a moment apart from
// the log's passes one item off, not two.
func TestPoolWithinOneItem(t *testing.T) {
	truth, ours := rows(0, 10, 20, 30), rows(0, 10, 20, 30)
	for i := range truth {
		truth[i].Fields["pool"], ours[i].Fields["pool"] = 2, 3
	}
	if res := Compare(truth, ours, 0, 0.05, []string{"pool"}); !res.Pass() {
		t.Fatalf("pool 3 against 2 failed: %+v", res.Fields)
	}
	for i := range ours {
		ours[i].Fields["pool"] = 4
	}
	if res := Compare(truth, ours, 0, 0.05, []string{"pool"}); res.Pass() {
		t.Fatalf("pool 4 against 2 passed: %+v", res.Fields)
	}
}

// TestCapacityPassesWithItsTime: a starved trainer's step_time, a sliver
// of its period, passes off by 5.4% (less than 5% of the period), and its
// train_capacity, the same measure's reciprocal, passes with it; off by
// more than the floor, both fail.
func TestCapacityPassesWithItsTime(t *testing.T) {
	const period = 22_000 // ns
	compare := func(ours float64) Result {
		var truth, got []Row
		for i := range 10 {
			start := uint64(i * period)
			truth = append(truth, Row{Step: i, Start: start, End: start + period,
				Fields: map[string]float64{"step_time": 4e-6, "train_capacity": 4 / 4e-6}})
			got = append(got, Row{Step: i, Start: start + 1, End: start + period + 1,
				Fields: map[string]float64{"step_time": ours, "train_capacity": 4 / ours}})
		}
		return Compare(truth, got, 0, 0.05, []string{"step_time", "train_capacity"})
	}
	res := compare(4.216e-6) // +5.4%, 0.216 µs of a 1.1 µs floor
	if !res.Pass() {
		t.Fatalf("a capacity whose step_time passed by the floor failed: %+v", res.Fields)
	}
	for _, f := range res.Fields {
		if f.Name != "period" && !f.ByFloor {
			t.Errorf("%s passed within 5%% of itself (%.2f%%): the test shows nothing", f.Name, 100*f.RelErr)
		}
	}
	if res := compare(5.2e-6); res.FieldsPass() { // +1.2 µs, over the floor
		t.Fatalf("a step_time off by more than the floor passed, or its capacity: %+v", res.Fields)
	}
}

// TestPeriodEndToEnd: a data-bound loop's steps vary widely (here 4 to
// 140 ms, 0.2 ms apart). Its start-to-start periods are its end-to-end
// ones a step earlier, so over a spread this wide their medians differ
// (21 against 35.5 ms); gpuprof's steps, ending where the loop's do, pass
// on the period measured end to end on both sides.
func TestPeriodEndToEnd(t *testing.T) {
	const gap = 200_000 // ns between one step's end and the next's start
	var truth, ours []Row
	end := uint64(1_000_000_000)
	for i, ms := range []uint64{4, 10, 12, 30, 41, 45, 140} {
		start := end + gap
		end = start + ms*1_000_000
		truth = append(truth, Row{Step: i, Start: start, End: end, Fields: map[string]float64{}})
		// gpuprof's step starts at the previous one's end, and ends 30 µs
		// after the loop's (its last probed call).
		o := Row{Step: i, Start: start - gap, End: end + 30_000, Fields: map[string]float64{}}
		if i > 0 {
			o.Start = ours[i-1].End
		}
		ours = append(ours, o)
	}
	res := Compare(truth, ours, 0, 0.05, []string{"period"})
	if !res.OneToOne || !res.Pass() {
		t.Fatalf("one to one %v, fields %+v: want the period to pass", res.OneToOne, res.Fields)
	}
	for _, f := range res.Fields {
		if f.Name == "period" && (f.N != 6 || math.Abs(f.Truth-0.0357) > 1e-4) {
			t.Errorf("period over %d steps, median %.4f s; want 6, the log's end-to-end 0.0357 s", f.N, f.Truth)
		}
	}
}
