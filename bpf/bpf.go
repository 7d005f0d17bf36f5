package bpf

import (
	"fmt"
)

// Record types as laid out in gpuprof.bpf.c.
type (
	Event     = gpuprofEvent
	NameEvent = gpuprofNameEvent
	KernelKey = gpuprofKernelKey
	PyLayout  = gpuprofPyLayout
	PyEvent   = gpuprofPyEvent
	Objects   = gpuprofObjects
	Programs  = gpuprofPrograms
	Maps      = gpuprofMaps
	Variables = gpuprofVariables
)

// Record kinds, the first byte of every ring buffer record.
const (
	KindCall       = 1
	KindKernelName = 2
	KindLibLoad    = 3
	KindPyWait     = 5
	KindPyGIL      = 6
)

// Counters in the stats map.
const (
	StatRingbufFull = iota
	StatKernelMapFull
	StatStaleCall
	StatNoThreadState
	NumStats
)

// Settings are the programs' load-time constants.
type Settings struct {
	WakeupBytes uint64 // data waiting in the ring buffer before the reader is woken
	PyMinWaitNS uint64 // Python lock waits shorter than this are not reported
}

// Load loads the programs and maps into the kernel.
func Load(set Settings) (*Objects, error) {
	spec, err := loadGpuprof()
	if err != nil {
		return nil, fmt.Errorf("load BPF spec: %w", err)
	}
	if err := spec.Variables["wakeup_bytes"].Set(set.WakeupBytes); err != nil {
		return nil, fmt.Errorf("set wakeup_bytes: %w", err)
	}
	if err := spec.Variables["py_min_wait_ns"].Set(set.PyMinWaitNS); err != nil {
		return nil, fmt.Errorf("set py_min_wait_ns: %w", err)
	}
	var objs Objects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return nil, fmt.Errorf("load BPF objects: %w", err)
	}
	return &objs, nil
}

// RingbufSize is the size of the events ring buffer in bytes.
func RingbufSize() (uint32, error) {
	spec, err := loadGpuprof()
	if err != nil {
		return 0, err
	}
	return spec.Maps["events"].MaxEntries, nil
}
