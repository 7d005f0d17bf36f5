package control

import (
	"slices"
	"time"

	"github.com/gpuprof/gpuprof/correlate"
)

// stepClock follows one process's step times for its launch phases.
type stepClock struct {
	walls []float64     // the latest steps' wall times, s
	told  time.Duration // the step time last told
}

// note keeps steps' wall times and returns the median of the latest
// cfg.Window, once there are cfg.Min, where it has grown by more than a
// quarter since it was last returned.
func (c *stepClock) note(cfg StepTimes, steps []correlate.Step) (time.Duration, bool) {
	for _, st := range steps {
		if st.WallTime > 0 {
			c.walls = append(c.walls, st.WallTime)
		}
	}
	if n := len(c.walls); n > cfg.Window {
		c.walls = append(c.walls[:0], c.walls[n-cfg.Window:]...)
	}
	if len(c.walls) < cfg.Min {
		return 0, false
	}
	sorted := slices.Sorted(slices.Values(c.walls))
	median := time.Duration(sorted[len(sorted)/2] * float64(time.Second))
	if median <= c.told+c.told/4 {
		return 0, false
	}
	c.told = median
	return median, true
}
