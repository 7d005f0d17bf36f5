package probes

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/gpuprof/gpuprof/bpf"
	"github.com/gpuprof/gpuprof/events"
)

// The ring buffer's records are the BPF programs', but what they carry
// was read from the target: frame counts, stack lengths, a kernel's name.
// FuzzDecodeRecord decodes any record: an event of a known kind, no more
// frames than the record has room for, and nothing left over from the
// event decoded into before (the reader decodes every record into one).
func FuzzDecodeRecord(f *testing.F) {
	raw := func(v any) []byte {
		var b bytes.Buffer
		if err := binary.Write(&b, binary.LittleEndian, v); err != nil {
			f.Fatal(err)
		}
		return b.Bytes()
	}
	f.Add(raw(bpf.Event{Kind: bpf.KindCall, Api: 3, Pid: 7, Tid: 8, StartNs: 100, EndNs: 250, Args: [5]uint64{1, 2}}))
	name := bpf.NameEvent{Kind: bpf.KindKernelName, Api: 3, Handle: 0xabc}
	copy(name.Name[:], []int8{'g', 'e', 'm', 'm'})
	f.Add(raw(name))
	py := bpf.PyEvent{Kind: bpf.KindPyWait, Nframes: 2, Pid: 7, Tid: 8, StartNs: 1, EndNs: 9}
	py.Frames[0].Code, py.Frames[1].Code = 0x7f0010, 0x7f0020
	f.Add(raw(py))
	f.Add(raw(bpf.StackEvent{Kind: bpf.KindStack, Reason: bpf.StackOffCPU, Pid: 7, NativeBytes: 24, Npy: 2, Flags: 1,
		Native: [64]uint64{0x401000, 0x402000, 0x403000}, Py: [32]uint64{0, 0x7f0010}}))
	f.Add(raw(bpf.SiteEvent{Kind: bpf.KindKernelSite, Api: 3, Nwords: 2, Words: [96]uint64{0x401000, 0x7fff00}}))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var ev events.Event
		if err := decodeRecord(raw, &ev); err != nil {
			return
		}
		if ev.Kind == 0 || len(ev.Frames) > 32 || len(ev.Native) > 96 {
			t.Fatalf("decoded kind %d, %d Python and %d native frames", ev.Kind, len(ev.Frames), len(ev.Native))
		}
		used := events.Event{Kind: events.KindPyWait, API: 9, Name: "stale", Ret: 5, Out: 7, Pool: 3, Args: [5]uint64{1, 2, 3, 4, 5},
			Frames: []events.PyFrame{{Func: "f"}}, Native: []events.NativeFrame{{Func: "g"}}, GPUs: []events.GPUSample{{}}}
		if err := decodeRecord(raw, &used); err != nil || !reflect.DeepEqual(used, ev) {
			t.Fatalf("decoded into a used event: %+v (%v); into a new one: %+v", used, err, ev)
		}
	})
}
