package bpf

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/cilium/ebpf/btf"

	"github.com/gpuprof/gpuprof/events"
)

// TestLayout checks the Go record types against the compiled object's BTF:
// the reader decodes raw ring buffer bytes with them.
func TestLayout(t *testing.T) {
	spec, err := loadGpuprof()
	if err != nil {
		t.Fatal(err)
	}
	for name, goSize := range map[string]int{
		"event":      binary.Size(Event{}),
		"name_event": binary.Size(NameEvent{}),
		"kernel_key": binary.Size(KernelKey{}),
	} {
		var st *btf.Struct
		if err := spec.Types.TypeByName(name, &st); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if int(st.Size) != goSize {
			t.Errorf("struct %s: %d bytes in BPF, %d in Go", name, st.Size, goSize)
		}
		if st.Members[0].Name != "kind" && name != "kernel_key" {
			t.Errorf("struct %s: the kind tag must come first, got %s", name, st.Members[0].Name)
		}
	}
}

// TestGILFollow: the programs report GIL waits by the bound the
// correlator joins them by.
func TestGILFollow(t *testing.T) {
	spec, err := loadSpec(Settings{})
	if err != nil {
		t.Fatal(err)
	}
	var v uint64
	if err := spec.Variables[gpuprofVarGilFollowNs].Get(&v); err != nil {
		t.Fatal(err)
	}
	if v != events.GILFollowNS {
		t.Errorf("gil_follow_ns %d, want events.GILFollowNS %d", v, events.GILFollowNS)
	}
}

// TestTraps: each program's trap is its section's: a uprobe's entry, a
// uretprobe's return, none for a tracepoint or a perf event; and a run
// costs its own time and its trap's.
func TestTraps(t *testing.T) {
	spec, err := loadGpuprof()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Trap{"api_entry": TrapEntry, "launch_entry": TrapEntry, "api_return": TrapReturn,
		"py_lock_return": TrapReturn, "offcpu_leave": TrapNone, "cpu_sample": TrapNone}
	for name, trap := range want {
		ps := spec.Programs[name]
		if ps == nil {
			t.Fatalf("no program %s", name)
		}
		if got := trapOf(ps.SectionName); got != trap {
			t.Errorf("%s (%s): trap %d, want %d", name, ps.SectionName, got, trap)
		}
	}
	for _, tc := range []struct {
		st   ProgramStat
		want time.Duration
	}{
		{ProgramStat{Runs: 1000, Runtime: 200 * time.Microsecond, Trap: TrapEntry}, 200*time.Microsecond + 1000*EntryTrapCost},
		{ProgramStat{Runs: 1000, Runtime: 300 * time.Microsecond, Trap: TrapReturn}, 300*time.Microsecond + 1000*ReturnTrapCost},
		{ProgramStat{Runs: 1000, Runtime: 100 * time.Microsecond, Trap: TrapNone}, 100 * time.Microsecond},
	} {
		if got := tc.st.Cost(); got != tc.want {
			t.Errorf("%+v: cost %v, want %v", tc.st, got, tc.want)
		}
	}
}
