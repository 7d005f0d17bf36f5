package bpf

import (
	"encoding/binary"
	"testing"

	"github.com/cilium/ebpf/btf"
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
