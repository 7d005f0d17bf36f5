package nvml

import (
	"errors"
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuprof/gpuprof/events"
)

// notAvailable is NVML_VALUE_NOT_AVAILABLE ((unsigned long long)-1), which
// GetComputeRunningProcesses gives as a process's memory where it cannot
// tell (under some virtualization, or without the privilege).
const notAvailable = math.MaxUint64

// readProcs fills smp.Procs: the processes with a compute context on g, with
// their memory and, where several share g, at most every procUtilEvery,
// their mean utilization over the samples the driver took since the last
// time. A GPU that one process has to itself is not asked: its utilization
// is that process's, and the call costs ~2.8 ms of CPU on an H200 (driver
// 580), more than the rest of a round.
func (s *Sampler) readProcs(g *gpu, smp *events.GPUSample) {
	var infos []nvml.ProcessInfo
	listed := s.ask(g, fProcs, func() (r nvml.Return) { infos, r = g.dev.GetComputeRunningProcesses(); return })
	for _, p := range infos {
		mem := nan
		if p.UsedGpuMemory != notAvailable {
			mem = float64(p.UsedGpuMemory)
		}
		smp.Procs = append(smp.Procs, events.GPUProcess{PID: p.Pid, MemUsed: mem, SMUtil: nan, MemUtil: nan})
	}
	if !listed && !g.unsupported.has(fProcs) {
		return // the list is not due this round: nor is utilization, which goes by it
	}
	if listed && len(infos) < 2 {
		return // no one to share utilization among: spare the costly call
	}

	var util []nvml.ProcessUtilizationSample
	last := g.lastSeenUs
	if !s.ask(g, fProcUtil, func() (r nvml.Return) {
		util, r = g.dev.GetProcessUtilization(last)
		if r == nvml.ERROR_NOT_FOUND { // no sample since last: not a failure
			util, r = nil, nvml.SUCCESS
		}
		return r
	}) {
		return
	}
	for _, u := range util {
		g.lastSeenUs = max(g.lastSeenUs, u.TimeStamp)
		// Without the list (not supported), the samples say who runs here;
		// with it, a process it lacks is a graphics one, or gone.
		if !listed && findProc(smp.Procs, u.Pid) == nil {
			smp.Procs = append(smp.Procs, events.GPUProcess{PID: u.Pid, MemUsed: nan, SMUtil: nan, MemUtil: nan})
		}
	}
	for i := range smp.Procs {
		p := &smp.Procs[i]
		var sm, mem, n float64
		for _, u := range util {
			if u.Pid == p.PID {
				sm, mem, n = sm+float64(u.SmUtil), mem+float64(u.MemUtil), n+1
			}
		}
		if n > 0 {
			p.SMUtil, p.MemUtil = sm/n, mem/n
		}
	}
}

func findProc(procs []events.GPUProcess, pid uint32) *events.GPUProcess {
	for i := range procs {
		if procs[i].PID == pid {
			return &procs[i]
		}
	}
	return nil
}

// ComputeProcesses maps each process with a compute context on a sampled GPU
// to the NVML indexes of those GPUs, as gpuprof attach --gpus needs to find
// a job's processes. GPUs that cannot list processes are left out; it is an
// error where none can, or NVML is not answering.
func (s *Sampler) ComputeProcesses() (map[uint32][]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	if s.calls.stuck() {
		return nil, errStuck
	}
	out := map[uint32][]int{}
	listed := 0
	for _, g := range s.gpus {
		var infos []nvml.ProcessInfo
		if !s.askNow(g, fProcs, fields[fProcs].call, func() (r nvml.Return) { infos, r = g.dev.GetComputeRunningProcesses(); return }) {
			continue
		}
		listed++
		for _, p := range infos {
			if idx := out[p.Pid]; len(idx) == 0 || idx[len(idx)-1] != g.info.Index {
				out[p.Pid] = append(idx, g.info.Index)
			}
		}
	}
	s.flushNotices()
	if listed == 0 {
		return nil, errors.New("list GPU compute processes: no sampled GPU answered (see the warnings above)")
	}
	return out, nil
}
