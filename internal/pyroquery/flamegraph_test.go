package pyroquery

import (
	"encoding/json"
	"maps"
	"testing"
)

// The answer Pyroscope v1.9.0 gave for two samples, main;step;backward
// (3 ms) and main;step;forward;matmul (2 ms).
const answer = `{"flamegraph":{"names":["total","main","step","forward","matmul","backward"],"levels":[{"values":["0","5000000","0","0"]},{"values":["0","5000000","0","1"]},{"values":["0","5000000","0","2"]},{"values":["0","3000000","3000000","5","0","2000000","0","3"]},{"values":["3000000","2000000","2000000","4"]}],"total":"5000000","maxSelf":"3000000"}}`

func TestFlameGraphByFunction(t *testing.T) {
	var resp struct{ Flamegraph FlameGraph }
	if err := json.Unmarshal([]byte(answer), &resp); err != nil {
		t.Fatal(err)
	}
	f := resp.Flamegraph
	if f.Total != 5000000 {
		t.Errorf("total %d, want 5000000", f.Total)
	}
	self, err := f.SelfByFunction()
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int64{"backward": 3000000, "matmul": 2000000}; !maps.Equal(self, want) {
		t.Errorf("self %v, want %v", self, want)
	}
	total, _ := f.TotalByFunction()
	if want := map[string]int64{"main": 5000000, "step": 5000000, "backward": 3000000, "forward": 2000000, "matmul": 2000000}; !maps.Equal(total, want) {
		t.Errorf("total %v, want %v", total, want)
	}
}

// A recursive function's total counts each stack once.
func TestTotalByFunctionRecursion(t *testing.T) {
	f := FlameGraph{Names: []string{"total", "f", "g"}}
	for _, v := range [][]int64{{0, 10, 0, 0}, {0, 10, 2, 1}, {0, 8, 3, 1}, {0, 5, 5, 2}} {
		f.Levels = append(f.Levels, struct {
			Values int64s `json:"values"`
		}{v})
	}
	total, err := f.TotalByFunction()
	if err != nil {
		t.Fatal(err)
	}
	if total["f"] != 10 || total["g"] != 5 {
		t.Errorf("totals %v, want f 10 (not 18), g 5", total)
	}
}

func TestTreeRefusesBrokenLevels(t *testing.T) {
	f := FlameGraph{Names: []string{"total", "a"}}
	for _, v := range [][]int64{{0, 10, 0, 0}, {20, 5, 5, 1}} {
		f.Levels = append(f.Levels, struct {
			Values int64s `json:"values"`
		}{v})
	}
	if _, err := f.Tree(); err == nil {
		t.Error("a node past its level's parents was placed")
	}
}
