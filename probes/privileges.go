package probes

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Capabilities gpuprof needs (linux/capability.h).
const (
	capSysPtrace = 19 // read another process's maps and files under /proc/PID/root
	capSysAdmin  = 21 // stands in for BPF and PERFMON on kernels before 5.8
	capPerfmon   = 38 // attach uprobes
	capBPF       = 39 // load BPF programs and maps
)

// CheckPrivileges returns an error saying what to do when the effective
// capabilities do not allow loading BPF programs and tracing other
// processes.
func CheckPrivileges() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("read capabilities: %w", err)
	}
	has := func(c uint) bool { return data[c/32].Effective&(1<<(c%32)) != 0 }
	var missing []string
	if !has(capBPF) && !has(capSysAdmin) {
		missing = append(missing, "CAP_BPF")
	}
	if !has(capPerfmon) && !has(capSysAdmin) {
		missing = append(missing, "CAP_PERFMON")
	}
	if !has(capSysPtrace) {
		missing = append(missing, "CAP_SYS_PTRACE")
	}
	if len(missing) > 0 {
		return fmt.Errorf("gpuprof needs root, or the capabilities %v it lacks: run it with sudo", missing)
	}
	return nil
}
