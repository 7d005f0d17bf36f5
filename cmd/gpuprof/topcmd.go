package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/gpuprof/gpuprof/control"
	"github.com/gpuprof/gpuprof/probes"
	"github.com/gpuprof/gpuprof/report"
	"github.com/gpuprof/gpuprof/topview"
)

// topCmd is attach with a full-screen view (topview) in place of the
// live line; the summary comes after the screen is gone. With no
// terminal to draw on it is attach.
func topCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a, err := parseAttach("top", args, stderr)
	if err != nil {
		return err
	}
	if !isTerminal(stdout) {
		fmt.Fprintln(stderr, "gpuprof top: stdout is not a terminal: showing the live line instead, as gpuprof attach does")
		return a.attach(ctx, stdout, stderr, profile)
	}
	t := &topScreen{model: topview.New(), logs: &noteWriter{w: stderr}}
	// The probes' and NVML's warnings (slog, taken as the session
	// opens) go to the screen's notes while it is up: written to the
	// terminal they would scribble over it.
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(t.logs, &slog.HandlerOptions{Level: logLevel()})))
	return a.attach(ctx, stdout, stderr, t.profile)
}

// topScreen is gpuprof top's view of a profile.
type topScreen struct {
	model *topview.Model
	logs  *noteWriter
}

// profile is profile with the screen up. Quitting it (q) ends the run as
// Ctrl-C ends attach's; what profile writes meanwhile (the summary, a
// target's exit) is held and written once the terminal is back.
func (t *topScreen) profile(ctx context.Context, sess *probes.Session, pids []int, f *profileFlags, gw *gpuWatch, stdout, stderr io.Writer) error {
	scr, err := topview.Open(t.model)
	if err != nil {
		fmt.Fprintf(stderr, "gpuprof top: %v: showing the live line instead\n", err)
		return profile(ctx, sess, pids, f, gw, stdout, stderr)
	}
	if gw.sampler != nil {
		t.model.GPUs(gw.sampler.GPUs())
	}
	scr.Before = func() {
		t.model.Targets(sess.PIDs())
		t.model.Lost(sess.Stats().Lost())
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	shown := make(chan struct{})
	go func() {
		defer close(shown)
		scr.Run(ctx)
		cancel() // quit: detach, as on Ctrl-C
	}()
	t.logs.to(t.model.Note)
	var out, errs lockedBuffer
	f.view = t
	err = profile(ctx, sess, pids, f, gw, &out, &errs)
	cancel()
	<-shown // the terminal is back
	t.logs.to(nil)
	io.Copy(stderr, &errs.b)
	io.Copy(stdout, &out.b)
	return err
}

// outputs are the profile's live line, with the screen in its place:
// the line shows nowhere, its notes (the loop's and profile's own) on
// the screen, and the screen takes the steps.
func (t *topScreen) outputs() (*report.Live, *stepOutputs) {
	live := report.NewLive(io.Discard, false)
	live.Notes = t.model.Note
	return live, &stepOutputs{live: live, more: []control.Output{screenSteps{t.model}}}
}

// screenSteps is the screen as one of the loop's outputs: its notes come
// through the live line's, so not here again.
type screenSteps struct{ *topview.Model }

func (screenSteps) Note(string) {}

// noteWriter writes to w, or while a screen is up hands each line to
// its notes.
type noteWriter struct {
	mu   sync.Mutex
	w    io.Writer
	note func(string)
}

func (n *noteWriter) to(note func(string)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.note = note
}

func (n *noteWriter) Write(p []byte) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.note == nil {
		return n.w.Write(p)
	}
	for line := range strings.Lines(string(p)) {
		n.note(strings.TrimRight(line, "\n"))
	}
	return len(p), nil
}

// lockedBuffer is a buffer several goroutines may write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
