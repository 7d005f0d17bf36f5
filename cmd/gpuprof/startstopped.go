package main

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"syscall"
)

// startStopped starts the command newCmd makes, attaches (attach) before
// any of its code runs, then lets it run. Traced, the command stops at
// its first instruction once exec is done: its executable and loader are
// mapped in full (exec's own return to the parent comes before the
// loader is mapped), so the loader hook attached then sees every library
// it loads. Where tracing is not allowed (Yama's ptrace_scope 3, a
// seccomp filter), it starts untraced and attach comes as it runs.
func startStopped(newCmd func() *exec.Cmd, attach func(pid int) error) (*exec.Cmd, error) {
	// ptrace requests must come from the thread that started the tracee.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dropAmbientCaps()
	cmd := newCmd()
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
	if err := cmd.Start(); err != nil {
		if !errors.Is(err, syscall.EPERM) {
			return nil, err
		}
		cmd = newCmd()
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		return cmd, attach(cmd.Process.Pid)
	}
	pid := cmd.Process.Pid
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, syscall.WALL, nil); err != nil {
		cmd.Process.Kill()
		return nil, fmt.Errorf("wait for %s to start: %w", cmd.Path, err)
	}
	if !ws.Stopped() {
		return nil, fmt.Errorf("%s ended as it started (%v)", cmd.Path, ws)
	}
	aerr := attach(pid)
	if err := syscall.PtraceDetach(pid); err != nil {
		cmd.Process.Kill()
		return nil, errors.Join(aerr, fmt.Errorf("let %s run: %w", cmd.Path, err))
	}
	return cmd, aerr
}
