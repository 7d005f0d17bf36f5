//go:build nvmlfake

package nvml

import (
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuprof/gpuprof/nvml/nvmlfake"
)

// Open, in a gpuprof built for its own end-to-end tests (-tags nvmlfake),
// is eight fake H200s (nvmlfake) instead of the driver, so that attach's
// GPU side runs where no GPU is. GPU 0, and it alone, runs the processes
// named (comma-separated) in GPUPROF_FAKE_NVML_PIDS, and those in the file
// GPUPROF_FAKE_NVML_PIDS_FILE names as it reads when asked: a test adds a
// process there to have it open a context on GPU 0 later.
// GPUPROF_FAKE_NVML_XID=GPU:XID has the driver report that Xid once.
// GPUPROF_FAKE_NVML_HANG=Init has Init never return, =GPU that GPU's
// power reads from the 51st on (a second into a run at 20 ms);
// GPUPROF_FAKE_NVML_LOST=GPU has that GPU fall off the bus from its second
// utilization read on (ERROR_GPU_IS_LOST).
func Open() Library {
	h := nvmlfake.NewHost()
	if hang := os.Getenv("GPUPROF_FAKE_NVML_HANG"); hang == "Init" {
		h.Srv.InitFunc = func() nvml.Return { select {} }
	} else if g, err := strconv.Atoi(hang); err == nil {
		read := h.Devs[g].GetPowerUsageFunc
		var n atomic.Int32
		h.Devs[g].GetPowerUsageFunc = func() (uint32, nvml.Return) {
			if n.Add(1) > 50 {
				select {}
			}
			return read()
		}
	}
	if g, err := strconv.Atoi(os.Getenv("GPUPROF_FAKE_NVML_LOST")); err == nil {
		read := h.Devs[g].GetUtilizationRatesFunc
		var n atomic.Int32
		h.Devs[g].GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			if n.Add(1) > 1 {
				return nvml.Utilization{}, nvml.ERROR_GPU_IS_LOST
			}
			return read()
		}
	}
	if gpu, code, ok := strings.Cut(os.Getenv("GPUPROF_FAKE_NVML_XID"), ":"); ok {
		g, _ := strconv.Atoi(gpu)
		x, _ := strconv.ParseUint(code, 10, 64)
		h.Xids <- nvml.EventData{Device: h.Devs[g], EventType: nvml.EventTypeXidCriticalError, EventData: x}
	}
	for i, d := range h.Devs {
		if i != 0 {
			d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
			continue
		}
		d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			list := os.Getenv("GPUPROF_FAKE_NVML_PIDS")
			if path := os.Getenv("GPUPROF_FAKE_NVML_PIDS_FILE"); path != "" {
				if b, err := os.ReadFile(path); err == nil {
					list += "," + string(b)
				}
			}
			var procs []nvml.ProcessInfo
			for _, f := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == '\n' || r == ' ' }) {
				if pid, err := strconv.ParseUint(f, 10, 32); err == nil {
					procs = append(procs, nvml.ProcessInfo{Pid: uint32(pid), UsedGpuMemory: nvmlfake.GiB(3)})
				}
			}
			return procs, nvml.SUCCESS
		}
	}
	return h.Srv
}
