package probes

import (
	"encoding/binary"
	"fmt"

	"github.com/gpuprof/gpuprof/bpf"
	"github.com/gpuprof/gpuprof/events"
)

var (
	callSize  = binary.Size(bpf.Event{})
	nameSize  = binary.Size(bpf.NameEvent{})
	pySize    = binary.Size(bpf.PyEvent{})
	stackSize = binary.Size(bpf.StackEvent{})
	siteSize  = binary.Size(bpf.SiteEvent{})
)

// eventKinds is the events kind each record kind (gpuprof.bpf.c's enum
// event_kind) decodes to: the two are numbered apart, events.Kind holding
// kinds of its own between them. TestEventKinds holds it to every value
// of the enum.
var eventKinds = [...]events.Kind{
	bpf.KindCall:       events.KindCall,
	bpf.KindKernelName: events.KindKernelName,
	bpf.KindLibLoad:    events.KindLibLoad,
	bpf.KindPyWait:     events.KindPyWait,
	bpf.KindPyGIL:      events.KindPyGIL,
	bpf.KindWrite:      events.KindWrite,
	bpf.KindStack:      events.KindCPUSample, // or another stack kind, by the record's reason
	bpf.KindKernelSite: events.KindKernelSite,
}

// stackKinds is the events kind of each stack reason (enum stack_reason).
var stackKinds = map[uint8]events.Kind{bpf.StackCPU: events.KindCPUSample,
	bpf.StackLaunch: events.KindLaunchStack, bpf.StackCall: events.KindCallStack, bpf.StackOffCPU: events.KindOffCPU}

// decodeRecord turns one ring buffer record into an event.
func decodeRecord(raw []byte, ev *events.Event) error {
	if len(raw) == 0 {
		return fmt.Errorf("decode record: empty")
	}
	var kind events.Kind
	if int(raw[0]) < len(eventKinds) {
		kind = eventKinds[raw[0]]
	}
	switch raw[0] {
	case bpf.KindCall, bpf.KindLibLoad, bpf.KindPyGIL, bpf.KindWrite:
		if len(raw) < callSize {
			return fmt.Errorf("decode record: %d bytes, want %d", len(raw), callSize)
		}
		var r bpf.Event
		if _, err := binary.Decode(raw, binary.LittleEndian, &r); err != nil {
			return fmt.Errorf("decode record: %w", err)
		}
		*ev = events.Event{Kind: kind, API: r.Api, PID: r.Pid, TID: r.Tid,
			Start: r.StartNs, End: r.EndNs, Launches: r.Launches, GraphLaunches: r.GraphLaunches,
			LaunchFirst: r.LaunchFirstNs, LaunchLast: r.LaunchLastNs, Args: r.Args, Ret: r.Ret, Out: r.Out,
			Pool: r.Pool, PoolState: r.PoolState, PoolGets: r.PoolGets}
	case bpf.KindKernelName:
		if len(raw) < nameSize {
			return fmt.Errorf("decode record: %d bytes, want %d", len(raw), nameSize)
		}
		var r bpf.NameEvent
		if _, err := binary.Decode(raw, binary.LittleEndian, &r); err != nil {
			return fmt.Errorf("decode record: %w", err)
		}
		*ev = events.Event{Kind: kind, API: r.Api, PID: r.Pid, TID: r.Tid,
			Start: r.TsNs, End: r.TsNs, Out: r.Handle, Name: cString(r.Name[:])}
		ev.Args[1] = r.Arg
	case bpf.KindPyWait:
		if len(raw) < pySize {
			return fmt.Errorf("decode record: %d bytes, want %d", len(raw), pySize)
		}
		var r bpf.PyEvent
		if _, err := binary.Decode(raw, binary.LittleEndian, &r); err != nil {
			return fmt.Errorf("decode record: %w", err)
		}
		*ev = events.Event{Kind: kind, PID: r.Pid, TID: r.Tid, Start: r.StartNs, End: r.EndNs, Ret: uint64(r.Ret),
			Name: WaitFunc(r.Wait)}
		ev.Args[0] = r.Arg0
		for i := 0; i < int(r.Nframes) && i < len(r.Frames); i++ {
			// Named from the code object by the session (nameFrames).
			ev.Frames = append(ev.Frames, events.PyFrame{Code: r.Frames[i].Code, Self: r.Frames[i].Self})
		}
	case bpf.KindStack:
		return decodeStack(raw, ev)
	case bpf.KindKernelSite:
		if len(raw) < siteSize {
			return fmt.Errorf("decode record: %d bytes, want %d", len(raw), siteSize)
		}
		var r bpf.SiteEvent
		if _, err := binary.Decode(raw, binary.LittleEndian, &r); err != nil {
			return fmt.Errorf("decode record: %w", err)
		}
		*ev = events.Event{Kind: kind, API: r.Api, PID: r.Pid, TID: r.Tid, Start: r.TsNs, End: r.TsNs, Out: r.Handle}
		ev.Native = make([]events.NativeFrame, 0, min(int(r.Nwords), len(r.Words)))
		for _, w := range r.Words[:min(int(r.Nwords), len(r.Words))] {
			ev.Native = append(ev.Native, events.NativeFrame{Offset: w})
		}
	default:
		return fmt.Errorf("decode record: unknown kind %d", raw[0])
	}
	return nil
}

func cString(b []int8) string {
	n := 0
	for n < len(b) && b[n] != 0 {
		n++
	}
	out := make([]byte, n)
	for i := range out {
		out[i] = byte(b[i])
	}
	return string(out)
}

// flag is 1 where flags has f, else 0.
func flag(flags, f uint32) uint64 {
	if flags&f != 0 {
		return 1
	}
	return 0
}

// decodeStack decodes a stack sample. Its native frames are bare
// addresses (NativeFrame.Offset, no Module) and its Python frames code
// objects until the session names them (stackSampler.name).
func decodeStack(raw []byte, ev *events.Event) error {
	if len(raw) < stackSize {
		return fmt.Errorf("decode record: %d bytes, want %d", len(raw), stackSize)
	}
	var r bpf.StackEvent
	if _, err := binary.Decode(raw, binary.LittleEndian, &r); err != nil {
		return fmt.Errorf("decode record: %w", err)
	}
	kind, ok := stackKinds[r.Reason]
	if !ok {
		return fmt.Errorf("decode record: unknown stack reason %d", r.Reason)
	}
	*ev = events.Event{Kind: kind, API: r.Api, PID: r.Pid, TID: r.Tid, Start: r.StartNs, End: r.EndNs}
	switch kind {
	case events.KindCPUSample:
		ev.Args[0] = r.Arg
		ev.Args[2] = flag(r.Flags, bpf.StackFlagInCall)
	case events.KindOffCPU:
		ev.Args[0] = r.Arg
		ev.Args[1] = flag(r.Flags, bpf.StackFlagRunnable)*events.OffCPURunnable | flag(r.Flags, bpf.StackFlagCondWait)*events.OffCPUGIL
		ev.Args[2] = flag(r.Flags, bpf.StackFlagInCall)
	case events.KindLaunchStack:
		ev.Args[0], ev.Args[1] = r.Arg, r.Weight
	}
	if n := int(r.NativeBytes) / 8; n > 0 {
		ev.Native = make([]events.NativeFrame, 0, min(n, len(r.Native)))
		for _, a := range r.Native[:min(n, len(r.Native))] {
			ev.Native = append(ev.Native, events.NativeFrame{Offset: a})
		}
	}
	for _, c := range r.Py[:min(int(r.Npy), len(r.Py))] {
		if c != 0 { // 0: a C-stack shim frame (py_stack)
			ev.Frames = append(ev.Frames, events.PyFrame{Code: c})
		}
	}
	return nil
}
