package topview

import (
	"time"

	"github.com/gpuprof/gpuprof/events"
)

// gpuStale is how long a GPU field the sampler stopped giving is shown:
// the sampler reads what moves slowly (memory, temperature) once a
// second and the power limit every ten, leaving it NaN in the rounds
// between, so a field keeps its latest reading for three of its slowest
// cadences (as the metrics exporter does), or three rounds where rounds
// are further apart.
const gpuStale = 30 * time.Second

// gpuState is one GPU's latest reading of each field the table shows.
type gpuState struct {
	shown events.GPUSample
	at    [len(gpuFields) + 1]uint64 // when each was read; the last: the throttle reasons
	gap   uint64                     // between its latest two rounds
}

// gpuFields are the float fields the GPU table shows.
var gpuFields = [...]func(*events.GPUSample) *float64{
	func(g *events.GPUSample) *float64 { return &g.GPUUtil },
	func(g *events.GPUSample) *float64 { return &g.SMActive },
	func(g *events.GPUSample) *float64 { return &g.PowerW },
	func(g *events.GPUSample) *float64 { return &g.PowerLimitW },
	func(g *events.GPUSample) *float64 { return &g.MemUsed },
	func(g *events.GPUSample) *float64 { return &g.MemTotal },
	func(g *events.GPUSample) *float64 { return &g.TempC },
	func(g *events.GPUSample) *float64 { return &g.SMClockMHz },
}

// add takes a round's sample of the GPU.
func (st *gpuState) add(g events.GPUSample) {
	if st.shown.TimeNS != 0 && g.TimeNS > st.shown.TimeNS {
		st.gap = g.TimeNS - st.shown.TimeNS
	}
	prev := st.shown
	st.shown = g
	st.shown.Procs = nil // not shown, and the sampler's to keep
	stale := max(uint64(gpuStale), 3*st.gap)
	for i, f := range gpuFields {
		switch v := *f(&g); {
		case events.Has(v):
			*f(&st.shown), st.at[i] = v, g.TimeNS
		case st.at[i] != 0 && g.TimeNS-st.at[i] <= stale:
			*f(&st.shown) = *f(&prev)
		}
	}
	t := len(gpuFields)
	switch {
	case g.ThrottleKnown:
		st.at[t] = g.TimeNS
	case st.at[t] != 0 && g.TimeNS-st.at[t] <= stale:
		st.shown.Throttle, st.shown.ThrottleKnown = prev.Throttle, true
	}
}
