package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
)

// runCmd starts a command and attaches to it before it runs
// (startStopped): the loader hook sees every CUDA library the command
// loads, as it loads it.
func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", stderr)
	var f profileFlags
	f.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageErr("run needs a command: gpuprof run [flags] -- python3 train.py")
	}
	sess, err := openSession(&f)
	if err != nil {
		return err
	}
	defer sess.Close()
	newCmd := func() *exec.Cmd {
		cmd := exec.Command(fs.Arg(0), fs.Args()[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
		return cmd
	}
	// The job gets Ctrl-C from the terminal itself; gpuprof waits for it
	// to exit rather than leaving it behind.
	cmd, aerr := startStopped(newCmd, func(pid int) error {
		_, err := sess.Attach(pid)
		return err
	})
	if cmd == nil {
		return fmt.Errorf("start %s: %w", fs.Arg(0), aerr)
	}
	pid := cmd.Process.Pid
	// After the start: the job keeps its own scheduling policy.
	f.stepBack()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	if aerr != nil {
		cmd.Process.Signal(syscall.SIGTERM)
		<-waited
		return aerr
	}
	// NVML after the attach: its Init can take seconds on a GPU without
	// persistence mode, and the job is running.
	gw, err := openGPUs(&f.gpu, false)
	if err != nil {
		cmd.Process.Signal(syscall.SIGTERM)
		<-waited
		return err
	}
	defer gw.close()
	perr := profile(ctx, sess, []int{pid}, &f, gw, stdout, stderr)
	// Detach before waiting: after --duration the job runs on unprobed.
	if err := sess.Close(); err != nil {
		perr = errors.Join(perr, err)
	}
	werr := <-waited
	if perr != nil {
		return perr
	}
	var exit *exec.ExitError
	if errors.As(werr, &exit) {
		return exitError{code: exit.ExitCode()}
	}
	return werr
}
