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
// GPU side runs where no GPU is. The processes named in
// GPUPROF_FAKE_NVML_PIDS (comma-separated) run on GPU 0, and GPU 0 alone.
func Open() Library {
	h := nvmlfake.NewHost()
	var procs []nvml.ProcessInfo
	for _, f := range strings.Split(os.Getenv("GPUPROF_FAKE_NVML_PIDS"), ",") {
		if pid, err := strconv.ParseUint(f, 10, 32); err == nil {
			procs = append(procs, nvml.ProcessInfo{Pid: uint32(pid), UsedGpuMemory: nvmlfake.GiB(3)})
		}
	}
	for i, d := range h.Devs {
		own := procs
		if i != 0 {
			own = nil
		}
		d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return own, nvml.SUCCESS }
	}
	return h.Srv
}
