//go:build nvmlfake

package nvml

import (
	"os"
	"strconv"
	"strings"

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
func Open() Library {
	h := nvmlfake.NewHost()
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
