package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/gpuprof/gpuprof/probes"
)

func attachCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a, err := parseAttach("attach", args, stderr)
	if err != nil {
		return err
	}
	return a.attach(ctx, stdout, stderr, profile)
}

// attachFlags are what attach and top are given: the targets, and how
// to profile them.
type attachFlags struct {
	pids []int
	gpus string
	who  targetFlags
	f    profileFlags
}

// parseAttach parses the arguments of cmd (attach or top) and checks the
// targets exist.
func parseAttach(cmd string, args []string, stderr io.Writer) (*attachFlags, error) {
	fs := newFlags(cmd, stderr)
	var a attachFlags
	fs.IntSliceVarP(&a.pids, "pid", "p", nil, "the process to attach to (repeat for several)")
	fs.StringVar(&a.gpus, "gpus", "", "attach to every process with a compute context on these GPUs: all, or NVML indexes such as 0,2-3")
	a.who.register(fs)
	a.f.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if len(a.pids) == 0 && a.gpus == "" {
		return nil, usageErr("%s needs --pid PID (find it with pgrep -f train.py) or --gpus all", cmd)
	}
	if fs.NArg() > 0 {
		return nil, usageErr("%s takes no arguments, got %q; to start a command use gpuprof run -- CMD", cmd, fs.Args())
	}
	for _, pid := range a.pids {
		if pid <= 0 {
			return nil, usageErr("--pid %d is not a process ID", pid)
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			return nil, fmt.Errorf("no process with PID %d: check it with ps -p %d", pid, pid)
		}
	}
	return &a, nil
}

// profileFunc follows attached targets until ctx ends and prints the
// summary: profile, or gpuprof top's screen around it (topScreen.profile).
type profileFunc func(ctx context.Context, sess *probes.Session, pids []int, f *profileFlags, gw *gpuWatch, stdout, stderr io.Writer) error

// attach loads the probes, finds the --gpus processes, attaches to every
// target and profiles them with prof.
func (a *attachFlags) attach(ctx context.Context, stdout, stderr io.Writer, prof profileFunc) error {
	f, pids := &a.f, slices.Clone(a.pids)
	sess, err := openSession(f)
	if err != nil {
		return err
	}
	defer sess.Close()
	// The named targets checked before anything else is started; each is
	// attached to only if its PID still names it then (AttachTarget).
	targets := map[int]probes.Target{}
	for _, pid := range pids {
		if targets[pid], err = a.who.lookupTarget(pid); err != nil {
			return err
		}
	}
	f.stepBack()
	gw, err := openGPUs(&f.gpu, a.gpus != "")
	if err != nil {
		return err
	}
	defer gw.close()
	if a.gpus != "" {
		note := func(msg string) {
			if !f.quiet {
				fmt.Fprintln(stderr, msg)
			}
		}
		found, waited, err := gw.waitProcesses(ctx, a.gpus, f.duration, note)
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
	// A target that exits between the look and the attach (a job that
	// ends as gpuprof starts) ended as a target does, not as gpuprof:
	// said so, and the others profiled.
	var attached, gone []int
	for _, pid := range pids {
		t, ok := targets[pid]
		err := error(nil)
		if !ok { // found on a GPU
			t, err = a.who.lookupTarget(pid)
		}
		if err == nil {
			_, err = sess.AttachTarget(t)
		}
		switch {
		case errors.As(err, new(probes.NoProcessError)):
			gone = append(gone, pid)
			continue
		case err != nil && !slices.Contains(a.pids, pid):
			// Found on a GPU (--gpus), not named: the others go on.
			fmt.Fprintln(stderr, notAttached(err))
			continue
		case err != nil:
			return err
		}
		attached = append(attached, pid)
	}
	if len(gone) > 0 {
		fmt.Fprintf(stderr, "gpuprof: %s exited before gpuprof could attach\n", pidList(gone))
	}
	if len(attached) == 0 {
		if len(gone) > 0 && a.gpus == "" {
			return nil
		}
		return fmt.Errorf("no process on GPU %s could be attached to (see above)", a.gpus)
	}
	pids = attached
	return prof(ctx, sess, pids, f, gw, stdout, stderr)
}
