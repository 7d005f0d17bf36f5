package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/gpuprof/gpuprof/control"
	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/htmlreport"
	"github.com/gpuprof/gpuprof/perfetto"
	"github.com/gpuprof/gpuprof/report"
)

// pictureFlags are the outputs drawn from the run as a whole: the HTML
// report (--html) and the Perfetto timeline (--trace).
type pictureFlags struct {
	html       string
	trace      string
	traceMaxMB int
}

func (p *pictureFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&p.html, "html", "", "write a self-contained HTML report of the run to this file at the end (the verdict, the step breakdown over time, capacities, pool, GPUs, ranks, kernels and waits)")
	fs.StringVar(&p.trace, "trace", "", "write the run's timeline to this file as it goes, a Chrome trace JSON that opens in Perfetto (ui.perfetto.dev): steps with their phases, waits, syncs and copies, probed functions, GPU counters")
	fs.IntVar(&p.traceMaxMB, "trace-max-mb", perfetto.DefaultMaxBytes>>20, "stop adding to --trace once the file holds this many MiB (the file stays valid)")
}

// check fails now, before anything is attached, on a path the outputs
// cannot be written to.
func (p *pictureFlags) check() error {
	if p.traceMaxMB <= 0 {
		return usageErr("--trace-max-mb %d: give a positive size in MiB, e.g. 256", p.traceMaxMB)
	}
	if p.html != "" && p.html == p.trace {
		return usageErr("--html and --trace are both %s: give them different files", p.html)
	}
	return errors.Join(checkOutputFile("--html", p.html, "report.html"), checkOutputFile("--trace", p.trace, "timeline.json"))
}

// checkOutputFile fails on a path that is a directory or in none.
func checkOutputFile(flag, path, example string) error {
	if path == "" {
		return nil
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return usageErr("%s %s is a directory: give a file name, e.g. %s", flag, path, filepath.Join(path, example))
	}
	if st, err := os.Stat(filepath.Dir(path)); err != nil || !st.IsDir() {
		return usageErr("%s %s: directory %s does not exist", flag, path, filepath.Dir(path))
	}
	return nil
}

// pictures collects what the pictures need as the run goes.
type pictures struct {
	flags    pictureFlags
	page     *htmlreport.Collector // nil: no --html
	timeline *perfetto.Writer      // nil: no --trace
}

// openPictures starts the pictures f asks for; user names the --probe
// functions, threadName the threads (nil: in a replay, none).
func openPictures(f pictureFlags, user map[uint16]correlate.UserProbe, threadName func(pid, tid uint32) string) (*pictures, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	p := &pictures{flags: f}
	if f.html != "" {
		p.page = htmlreport.NewCollector()
	}
	if f.trace != "" {
		var err error
		p.timeline, err = perfetto.Create(f.trace, perfetto.Options{User: user, ThreadName: threadName, MaxBytes: int64(f.traceMaxMB) << 20})
		if err != nil {
			return nil, fmt.Errorf("--trace: %w", err)
		}
	}
	return p, nil
}

// threadComm names a live thread by its comm, where it can still be read.
func threadComm(pid, tid uint32) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/comm", pid, tid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// taps are the pictures' event taps, outputs their step outputs.
func (p *pictures) taps() []eventTap {
	var t []eventTap
	if p.page != nil {
		t = append(t, p.page)
	}
	if p.timeline != nil {
		t = append(t, p.timeline)
	}
	return t
}

func (p *pictures) outputs() []control.Output {
	var o []control.Output
	if p.page != nil {
		o = append(o, p.page)
	}
	if p.timeline != nil {
		o = append(o, p.timeline)
	}
	return o
}

// abandon ends the pictures of a run that did not start: the timeline
// closed valid, no page.
func (p *pictures) abandon() error {
	if p.timeline == nil {
		return nil
	}
	return p.timeline.Close()
}

// runInfo is what the page says of the run besides its series.
type runInfo struct {
	title, source string
	attached      float64
	kernels       func(pid uint32) []report.Kernel // nil: not counted
	gpus          []correlate.GPURun
	loss          *report.Loss
}

// close writes the page, ends the timeline, and says where on w.
func (p *pictures) close(loop *control.Loop, info runInfo, w io.Writer) error {
	var errs []error
	if p.timeline != nil {
		if err := p.timeline.Close(); err != nil {
			errs = append(errs, fmt.Errorf("--trace %s: %w", p.flags.trace, err))
		} else {
			st := p.timeline.Stats()
			fmt.Fprintf(w, "timeline: %s (%d steps, %d slices, %d counter values, %s; open it in ui.perfetto.dev)\n",
				p.flags.trace, st.Steps, st.Slices, st.Counters, report.Bytes(float64(st.Bytes)))
			if st.Truncated {
				fmt.Fprintf(w, "timeline: cut at %d MiB (--trace-max-mb): nothing after CLOCK_MONOTONIC %d ns is in it\n", p.flags.traceMaxMB, st.AtNS)
			}
		}
	}
	if p.page != nil {
		r := htmlreport.Report{Title: info.title, Source: info.source, Version: version, Attached: info.attached,
			GPUs: info.gpus, Loss: info.loss}
		for _, run := range loop.Runs() {
			proc := htmlreport.Process{PID: run.PID, Rank: run.Rank, Ranked: run.Ranked, Run: run.Run,
				Engine: correlate.EngineProcess(run.Run)}
			if info.kernels != nil {
				proc.Kernels = info.kernels(run.PID)
			}
			r.Processes = append(r.Processes, proc)
		}
		if err := htmlreport.WriteFile(p.flags.html, r, p.page); err != nil {
			errs = append(errs, err)
		} else {
			fmt.Fprintf(w, "report: %s\n", p.flags.html)
		}
	}
	return errors.Join(errs...)
}

// commandTitle names a process by its command line, where it can be read.
func commandTitle(pids []int) string {
	if len(pids) == 0 {
		return "every process on the GPUs"
	}
	cmd, err := procCmdline(pids[0])
	if err != nil || len(cmd) == 0 || cmd[0] == "" {
		return fmt.Sprintf("PID %d", pids[0])
	}
	for i, a := range cmd {
		if i > 0 || !strings.Contains(a, "/") {
			continue
		}
		cmd[i] = filepath.Base(a)
	}
	t := strings.Join(cmd, " ")
	if len(t) > 120 {
		t = t[:117] + "..."
	}
	if len(pids) > 1 {
		t += fmt.Sprintf(" and %d more", len(pids)-1)
	}
	return t
}
