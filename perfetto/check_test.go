package perfetto

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"testing"
)

// A reader of the files the Writer writes, for the tests: it holds a file
// to the Trace Event Format as Perfetto reads it (Perfetto's own trace
// processor downloads a binary at run time, so it is not used here).

type traceFile struct {
	DisplayTimeUnit string          `json:"displayTimeUnit"`
	OtherData       otherData       `json:"otherData"`
	TraceEvents     []traceEventRaw `json:"traceEvents"`
}

type otherData struct {
	Clock         string  `json:"clock"`
	ClockOriginNS *uint64 `json:"clock_origin_ns"`
	TSUnit        string  `json:"ts_unit"`
	Generator     string  `json:"generator"`
}

type traceEventRaw struct {
	Ph   *string        `json:"ph"`
	Name *string        `json:"name"`
	PID  *uint32        `json:"pid"`
	TID  *uint32        `json:"tid"`
	TS   *float64       `json:"ts"`
	Dur  *float64       `json:"dur"`
	S    string         `json:"s"`
	Args map[string]any `json:"args"`
}

type trackKey struct{ pid, tid uint32 }

// slice is an X event, its times in ns from the clock origin.
type slice struct {
	name       string
	pid, tid   uint32
	start, dur uint64
	args       map[string]any
	index      int // in the file
}

func (s slice) end() uint64 { return s.start + s.dur }

type counterValue struct {
	pid uint32
	ts  uint64
	v   float64
}

type parsed struct {
	origin      uint64
	slices      []slice
	tracks      map[trackKey][]slice
	procNames   map[uint32]string
	procSort    map[uint32]float64
	threadNames map[trackKey]string
	threadSort  map[trackKey]float64
	// counters by the track name Perfetto gives them: the event's name,
	// a space, the arg's key.
	counters map[string][]counterValue
	instants []slice
}

// nsOf reads a ts or dur back to the nanosecond, as Perfetto does
// (llround of µs × 1000).
func nsOf(us float64) uint64 { return uint64(math.Round(us * 1000)) }

// parse reads a written file and holds it to what Perfetto needs: the
// top-level shape, every event's phase and fields, and slices nesting on
// every track.
func parse(t *testing.T, data []byte) *parsed {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, tail(data))
	}
	for k := range top {
		if k != "displayTimeUnit" && k != "otherData" && k != "traceEvents" {
			t.Errorf("top-level key %q", k)
		}
	}
	var f traceFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if f.DisplayTimeUnit != "ns" || f.OtherData.ClockOriginNS == nil || f.OtherData.Clock != "CLOCK_MONOTONIC" {
		t.Fatalf("displayTimeUnit %q, otherData %+v", f.DisplayTimeUnit, f.OtherData)
	}
	p := &parsed{origin: *f.OtherData.ClockOriginNS, tracks: map[trackKey][]slice{}, procNames: map[uint32]string{},
		procSort: map[uint32]float64{}, threadNames: map[trackKey]string{}, threadSort: map[trackKey]float64{},
		counters: map[string][]counterValue{}}
	for i, e := range f.TraceEvents {
		if e.Ph == nil || e.Name == nil || *e.Name == "" || e.PID == nil || e.TID == nil {
			t.Fatalf("event %d: ph, name, pid or tid missing: %+v", i, e)
		}
		ts := -1.0
		if e.TS != nil {
			ts = *e.TS
		}
		if *e.Ph != "M" && ts < 0 {
			t.Fatalf("event %d (%s): ts %v", i, *e.Name, ts)
		}
		switch *e.Ph {
		case "X":
			if e.Dur == nil || *e.Dur < 0 {
				t.Fatalf("event %d (%s): dur %v", i, *e.Name, e.Dur)
			}
			s := slice{*e.Name, *e.PID, *e.TID, nsOf(ts), nsOf(*e.Dur), e.Args, i}
			p.slices = append(p.slices, s)
			k := trackKey{s.pid, s.tid}
			p.tracks[k] = append(p.tracks[k], s)
		case "C":
			if len(e.Args) != 1 {
				t.Fatalf("event %d (%s): counter args %v", i, *e.Name, e.Args)
			}
			for k, v := range e.Args {
				f, ok := v.(float64)
				if !ok {
					t.Fatalf("event %d (%s): counter value %v", i, *e.Name, v)
				}
				name := *e.Name + " " + k
				p.counters[name] = append(p.counters[name], counterValue{*e.PID, nsOf(ts), f})
			}
		case "M":
			switch *e.Name {
			case "process_name":
				p.procNames[*e.PID] = e.Args["name"].(string)
			case "thread_name":
				p.threadNames[trackKey{*e.PID, *e.TID}] = e.Args["name"].(string)
			case "process_sort_index":
				p.procSort[*e.PID] = e.Args["sort_index"].(float64)
			case "thread_sort_index":
				p.threadSort[trackKey{*e.PID, *e.TID}] = e.Args["sort_index"].(float64)
			default:
				t.Fatalf("event %d: metadata %q", i, *e.Name)
			}
		case "i":
			if e.S != "g" {
				t.Fatalf("event %d (%s): instant scope %q", i, *e.Name, e.S)
			}
			p.instants = append(p.instants, slice{name: *e.Name, start: nsOf(ts), index: i})
		default:
			t.Fatalf("event %d: phase %q", i, *e.Ph)
		}
	}
	for k, ss := range p.tracks {
		checkNesting(t, k, ss)
		if _, ok := p.threadNames[k]; !ok {
			t.Errorf("track %v has slices and no name", k)
		}
	}
	for k, name := range p.threadNames {
		if len(p.tracks[k]) == 0 {
			t.Errorf("track %v named %q has no slices", k, name)
		}
	}
	return p
}

// checkNesting: on one track, each slice is inside or apart from every
// other. In the order an importer reads them (by start, the longer first,
// then as written) each must end by the end of the slices it is in.
func checkNesting(t *testing.T, k trackKey, ss []slice) {
	t.Helper()
	sorted := slices.Clone(ss)
	slices.SortFunc(sorted, func(a, b slice) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(b.dur, a.dur), cmp.Compare(a.index, b.index))
	})
	var stack []slice
	for _, s := range sorted {
		for len(stack) > 0 && stack[len(stack)-1].end() <= s.start {
			stack = stack[:len(stack)-1]
		}
		if n := len(stack); n > 0 && s.end() > stack[n-1].end() {
			t.Fatalf("track %v: %s [%d, %d) crosses %s [%d, %d)", k, s.name, s.start, s.end(),
				stack[n-1].name, stack[n-1].start, stack[n-1].end())
		}
		// Written after a slice it contains that began with it: an
		// importer keeping the file's order would take it for the child.
		if n := len(stack); n > 0 && stack[n-1].start == s.start && stack[n-1].dur > s.dur && stack[n-1].index > s.index {
			t.Fatalf("track %v: %s [%d, %d) written after %s, inside it from its start", k, stack[n-1].name,
				stack[n-1].start, stack[n-1].end(), s.name)
		}
		stack = append(stack, s)
	}
}

// inside are the slices of ss inside parent.
func inside(ss []slice, parent slice) []slice {
	var out []slice
	for _, s := range ss {
		if s.index != parent.index && s.start >= parent.start && s.end() <= parent.end() {
			out = append(out, s)
		}
	}
	return out
}

func tail(data []byte) string {
	return fmt.Sprintf("... %q", data[max(0, len(data)-300):])
}
