package bpf

import (
	"encoding/binary"
	"testing"

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
