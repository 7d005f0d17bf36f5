package probes

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
)

// The releaser drops no link's last reference with close(2): it hands
// the links to closer processes, which drop them by exiting.
//
// Why: the releaser is out of reach of signals meant for gpuprof, not of
// a SIGKILL sent to gpuprof's cgroup (a supervisor stopping its unit, a
// pod deleted) or of `pkill -9 gpuprof`, whose pattern matches its name
// too. Killed in a close, it left int3s in the job as gpuprof did before
// it (TestKillingGpuprofsCgroupLeavesTargetAsItWas: 2 of 6 kills as the
// target's links went, 2026-12-03; the kernel logged "failed to
// unregister, leaking uprobe"). A process's files are closed by its exit
// after it has taken its SIGKILL off its pending signals, and a signal
// sent to a process already exiting is dropped: in an exit the kernel's
// get_user_pages never sees a fatal signal, and every breakpoint is taken
// out, however the closer ends.
//
// Links still made in the releaser are at risk while they are made: a
// SIGKILL that reaches the releaser then leaves the breakpoints the
// kernel's undo of the half-made link could not take out, until an
// attach to the same job probes the same addresses and detaches.

// closerEnv, in a releaser's child's environment, makes it a closer.
const closerEnv = "GPUPROF_LINK_CLOSER"

// maxClosers bounds the closers one batch starts. A process's exit
// closes its files one after another, each uprobe link waiting for the
// kernel's grace periods (closing.go); closers side by side wait for them
// together. Each costs ~0.2 ms to start and end (closerelf.go,
// BenchmarkCloser).
const maxClosers = 16

// runCloser is a closer's main: it says it runs (a byte on standard
// output), holds the links it was started with (its files from 3 on)
// until its standard input ends, then exits.
func runCloser() int {
	os.Stdout.Write([]byte{1})
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// closeByExit drops fds, each possibly a link's last reference, in the
// exits of closers, and returns once they have exited. Where a closer
// cannot be started its fds are closed here.
func closeByExit(fds []int) {
	n := min(len(fds), maxClosers)
	var wg sync.WaitGroup
	for i := range n {
		share := fds[i*len(fds)/n : (i+1)*len(fds)/n]
		wg.Go(func() { closeInCloser(share) })
	}
	wg.Wait()
}

// spawning orders the releaser's forks before its own copies' closes. A
// child forked for one batch holds a copy of every file until its exec
// closes them: a batch that dropped its own copies meanwhile would leave
// the last reference to that child's exec, at risk as a close is. Closes
// of own copies hold it shared, a closer's start alone.
var spawning sync.RWMutex

// startCloser starts a closer and returns once it runs (a variable: a
// test makes it fail). Not once it has exec'd, as cmd.Start returns: the
// child, forked with a copy of every file of the releaser's, drops the
// copies its exec closes later, on its way back to user mode, and a
// batch that dropped its own copies meanwhile left the last references
// there, where the child's SIGKILL from a killed cgroup, still pending,
// cut their probes' removal short ("failed to unregister, leaking
// uprobe" from the closers, named by their memfd's descriptor: 2 of 3
// runs of TestKillingGpuprofsCgroupLeavesTargetAsItWas, 2026-12-03). The
// closer's first act is a byte on its standard output: by then its
// exec's closes are done, and until then no batch drops its copies.
var startCloser = func(cmd *exec.Cmd) error {
	ready, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer ready.Close()
	cmd.Stdout = w
	spawning.Lock()
	defer spawning.Unlock()
	err = cmd.Start()
	w.Close()
	if err != nil {
		return err
	}
	if _, err := ready.Read(make([]byte, 1)); err != nil {
		// Died before it ran (killed at birth): its exit dropped its copies.
		cmd.Wait()
		return fmt.Errorf("the closer ended before it ran: %w", err)
	}
	return nil
}

// dropOwnCopies runs drop, which closes the releaser's own copies of
// links a closer holds, between closers' starts.
func dropOwnCopies(drop func()) {
	spawning.RLock()
	defer spawning.RUnlock()
	drop()
}

// keptForExit holds the link files no closer could take: the
// releaser's exit drops them, where no fatal signal gets in the way.
var keptForExit struct {
	sync.Mutex
	files []*os.File
}

func keepForExit(files []*os.File) {
	keptForExit.Lock()
	keptForExit.files = append(keptForExit.files, files...)
	keptForExit.Unlock()
}

// closerCmd is a closer reading in and holding files: closerELF where
// it can be run, else this binary.
func closerCmd(in *os.File, files []*os.File) *exec.Cmd {
	if path := closerProgram(); path != "" {
		return &exec.Cmd{Path: path, Stdin: in, ExtraFiles: files}
	}
	return binaryCloserCmd(in, files)
}

// binaryCloserCmd is this binary as a closer (RunReleaser's runCloser).
func binaryCloserCmd(in *os.File, files []*os.File) *exec.Cmd {
	return &exec.Cmd{Path: "/proc/self/exe", Stdin: in, ExtraFiles: files,
		Env: append(os.Environ(), releaserEnv+"=1", closerEnv+"=1")}
}

// closeInCloser starts a closer holding copies of fds, closes ours (not
// the last references now), and ends the closer's input.
func closeInCloser(fds []int) {
	files := make([]*os.File, len(fds))
	for i, fd := range fds {
		files[i] = os.NewFile(uintptr(fd), "link")
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	r, w, err := os.Pipe()
	if err != nil {
		return
	}
	cmd := closerCmd(r, files)
	err = startCloser(cmd)
	if err != nil && closerProgram() != "" {
		cmd = binaryCloserCmd(r, files)
		err = startCloser(cmd)
	}
	r.Close()
	if err != nil {
		// Ours are the last references, and a close here is what the
		// closers are for: a closer fails to start when gpuprof's cgroup
		// is being killed (its children die at birth), and a close in
		// place then ran into the releaser's own SIGKILL (the kernel's
		// "failed to unregister, leaking uprobe" from the releaser's
		// threads, whose name stays "exe", and int3s in the demo's
		// libcuda: 1 of 6 kills as the target's links went, 2026-12-03).
		// Kept instead, they go with the releaser's exit, when gpuprof
		// does, with their probes attached until then.
		w.Close()
		keepForExit(files)
		files = nil
		return
	}
	dropOwnCopies(func() {
		for _, f := range files {
			f.Close()
		}
	})
	w.Close()
	cmd.Wait()
}
