package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
)

func attachCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("attach", stderr)
	var pids []int
	fs.IntSliceVarP(&pids, "pid", "p", nil, "the process to attach to (repeat for several)")
	gpus := fs.String("gpus", "", "attach to every process with a compute context on these GPUs: all, or NVML indexes such as 0,2-3")
	var f profileFlags
	f.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if len(pids) == 0 && *gpus == "" {
		return usageErr("attach needs --pid PID (find it with pgrep -f train.py) or --gpus all")
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
	f.stepBack()
	gw, err := openGPUs(&f.gpu, *gpus != "")
	if err != nil {
		return err
	}
	defer gw.close()
	if *gpus != "" {
		note := func(msg string) {
			if !f.quiet {
				fmt.Fprintln(stderr, msg)
			}
		}
		found, waited, err := gw.waitProcesses(ctx, *gpus, f.duration, note)
		if err != nil {
			return err
		}
		if f.duration > 0 {
			f.duration -= waited // -d is the whole run, the wait included
		}
		for _, p := range found {
			if !slices.Contains(pids, p) {
				pids = append(pids, p)
			}
		}
	}
	for _, pid := range pids {
		if _, err := sess.Attach(pid); err != nil {
			return err
		}
	}
	return profile(ctx, sess, pids, &f, gw, stdout, stderr)
}
