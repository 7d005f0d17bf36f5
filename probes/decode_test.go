package probes

import (
	"bytes"
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/gpuprof/gpuprof/bpf"
	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

func rawCall(t testing.TB, r bpf.Event) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := binary.Write(&buf, binary.LittleEndian, r); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestDecodeRecord(t *testing.T) {
	a, _ := cudaapi.ByName("cudaEventElapsedTime")
	raw := rawCall(t, bpf.Event{Kind: bpf.KindCall, Layer: 1, Api: a.ID, Pid: 7, Tid: 8, Launches: 40,
		StartNs: 100, EndNs: 250, Args: [5]uint64{0x7ff0, 0xe1, 0xe2}, Out: uint64(math.Float32bits(6.5))})
	if len(raw) != callSize {
		t.Fatalf("record %d bytes, the C struct has %d", len(raw), callSize)
	}
	var e events.Event
	if err := decodeRecord(raw, &e); err != nil {
		t.Fatal(err)
	}
	if e.Kind != events.KindCall || e.Desc().Name != "cudaEventElapsedTime" || e.Duration() != 150 ||
		e.ElapsedMS() != 6.5 || e.Handle() != 0xe1 || e.Second() != 0xe2 || e.Launches != 40 {
		t.Fatalf("decoded %+v", e)
	}
	for _, bad := range [][]byte{nil, raw[:10], {9, 0, 0}} {
		if err := decodeRecord(bad, &e); err == nil {
			t.Errorf("decoded %x", bad)
		}
	}
	var n bpf.NameEvent
	n.Kind, n.Api, n.Handle = bpf.KindKernelName, 3, 0xabc
	for i, c := range "gemm_kernel" {
		n.Name[i] = int8(c)
	}
	var buf bytes.Buffer
	binary.Write(&buf, binary.LittleEndian, n)
	if err := decodeRecord(buf.Bytes(), &e); err != nil || e.Name != "gemm_kernel" || e.Out != 0xabc {
		t.Fatalf("name record: %+v %v", e, err)
	}
}

// BenchmarkDecodeRecord is the reader's cost per ring buffer record.
func BenchmarkDecodeRecord(b *testing.B) {
	raw := rawCall(b, bpf.Event{Kind: bpf.KindCall, Api: 3, EndNs: 1})
	var e events.Event
	b.ReportAllocs()
	for b.Loop() {
		if err := decodeRecord(raw, &e); err != nil {
			b.Fatal(err)
		}
	}
}

// TestEventKinds: every record kind of gpuprof.bpf.c's enum event_kind
// decodes, to the events kind of the same name (EV_PY_GIL: py_gil).
func TestEventKinds(t *testing.T) {
	kinds, err := bpf.EnumValues("event_kind")
	if err != nil {
		t.Fatal(err)
	}
	if len(kinds) == 0 {
		t.Fatal("enum event_kind has no values")
	}
	for name, v := range kinds {
		raw := make([]byte, max(callSize, nameSize, pySize, stackSize))
		raw[0] = byte(v)
		raw[1] = bpf.StackCPU // a stack record's reason
		var e events.Event
		if err := decodeRecord(raw, &e); err != nil {
			t.Errorf("%s (%d): %v", name, v, err)
			continue
		}
		if name == "EV_STACK" {
			if !e.Kind.IsStack() {
				t.Errorf("EV_STACK decodes to %q, not a stack kind", e.Kind.TraceName())
			}
			continue // its kind is its reason's: TestStackReasons
		}
		if want := strings.ToLower(strings.TrimPrefix(name, "EV_")); e.Kind.TraceName() != want {
			t.Errorf("%s (%d) decodes to %q, want %q", name, v, e.Kind.TraceName(), want)
		}
	}
}

// TestStackReasons: every reason of enum stack_reason decodes to a stack
// kind of its own, with its addresses and code objects as read.
func TestStackReasons(t *testing.T) {
	reasons, err := bpf.EnumValues("stack_reason")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[events.Kind]string{}
	for name, v := range reasons {
		r := bpf.StackEvent{Kind: bpf.KindStack, Reason: uint8(v), Pid: 7, Tid: 8, NativeBytes: 16, Npy: 1, Arg: 99, Weight: 4}
		r.Native[0], r.Native[1], r.Native[2] = 0x1000, 0x2000, 0x3000
		r.Py[0] = 0xabc
		raw, err := binary.Append(nil, binary.LittleEndian, &r)
		if err != nil {
			t.Fatal(err)
		}
		var e events.Event
		if err := decodeRecord(raw, &e); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !e.Kind.IsStack() {
			t.Errorf("%s decodes to %q, not a stack kind", name, e.Kind.TraceName())
		}
		if other, dup := seen[e.Kind]; dup {
			t.Errorf("%s and %s both decode to %q", name, other, e.Kind.TraceName())
		}
		seen[e.Kind] = name
		if len(e.Native) != 2 || e.Native[1].Offset != 0x2000 || len(e.Frames) != 1 || e.Frames[0].Code != 0xabc {
			t.Errorf("%s: native %v, frames %v: want the two addresses and one code object", name, e.Native, e.Frames)
		}
	}
}
