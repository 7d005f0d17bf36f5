package main

import (
	"context"
	"fmt"
	"io"
	"os"
)

func attachCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("attach", stderr)
	var pids []int
	fs.IntSliceVarP(&pids, "pid", "p", nil, "the process to attach to (repeat for several)")
	var f profileFlags
	f.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if len(pids) == 0 {
		return usageErr("attach needs --pid PID (find it with pgrep -f train.py)")
	}
	if fs.NArg() > 0 {
		return usageErr("attach takes no arguments, got %q; to start a command use gpuprof run -- CMD", fs.Args())
	}
	for _, pid := range pids {
		if pid <= 0 {
			return usageErr("--pid %d is not a process ID", pid)
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			return fmt.Errorf("no process with PID %d: check it with ps -p %d", pid, pid)
		}
	}
	sess, err := openSession(&f)
	if err != nil {
		return err
	}
	defer sess.Close()
	for _, pid := range pids {
		if _, err := sess.Attach(pid); err != nil {
			return err
		}
	}
	return profile(ctx, sess, pids, &f, stdout, stderr)
}
