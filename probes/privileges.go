package probes

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// Capabilities gpuprof needs (linux/capability.h); docs/safety.md
// says what each is for and how that was found out.
const (
	capDacReadSearch = 2  // read the job's files (interpreter, libraries) through /proc/PID/root where its directories are not gpuprof's user's to read
	capSysPtrace     = 19 // read another process's maps, memory and files under /proc/PID/root
	capSysAdmin      = 21 // the kernel's BPF statistics (--probe-stats); stands in for BPF and PERFMON on kernels before 5.8
	capPerfmon       = 38 // attach uprobes, sample stacks, set the Python watchpoints
	capBPF           = 39 // load BPF programs and maps
)

// capNames are the names of the capabilities gpuprof needs, as
// setpriv(1) and capsh(1) write them.
var capNames = map[uint]string{capDacReadSearch: "CAP_DAC_READ_SEARCH", capSysPtrace: "CAP_SYS_PTRACE",
	capSysAdmin: "CAP_SYS_ADMIN", capPerfmon: "CAP_PERFMON", capBPF: "CAP_BPF"}

// effective reports whether gpuprof's threads have capability c in their
// effective set.
func effective() (func(c uint) bool, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return nil, fmt.Errorf("read capabilities: %w", err)
	}
	return func(c uint) bool { return data[c/32].Effective&(1<<(c%32)) != 0 }, nil
}

// CheckPrivileges returns an error saying what to do when the effective
// capabilities do not allow loading BPF programs, tracing other processes
// and reading their files. Each is checked here rather than left to the
// kernel to refuse: some refusals would only show as probes missing
// (a Python interpreter whose file could not be read is not probed).
func CheckPrivileges() error {
	has, err := effective()
	if err != nil {
		return err
	}
	var missing []string
	if !has(capBPF) && !has(capSysAdmin) {
		missing = append(missing, capNames[capBPF])
	}
	if !has(capPerfmon) && !has(capSysAdmin) {
		missing = append(missing, capNames[capPerfmon])
	}
	for _, c := range []uint{capSysPtrace, capDacReadSearch} {
		if !has(c) {
			missing = append(missing, capNames[c])
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("gpuprof needs root, or the capabilities CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH; it lacks %s: run it with sudo",
			strings.Join(missing, ", "))
	}
	return nil
}

// CheckStatsPrivileges says what to do when the kernel's BPF statistics
// (--probe-stats) cannot be turned on: that takes CAP_SYS_ADMIN.
func CheckStatsPrivileges() error {
	has, err := effective()
	if err != nil {
		return err
	}
	if !has(capSysAdmin) {
		return fmt.Errorf("--probe-stats turns on the kernel's BPF statistics, which needs CAP_SYS_ADMIN (or root): add it, or leave out --probe-stats")
	}
	return nil
}
