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
	"github.com/gpuprof/gpuprof/report"
)

// pictureFlags are the outputs drawn from the run as a whole: the HTML
// report (--html) and the Perfetto timeline (--trace).
type pictureFlags struct {
	html string
}

func (p *pictureFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&p.html, "html", "", "write a self-contained HTML report of the run to this file at the end (the verdict, the step breakdown over time, capacities, pool, GPUs, ranks, kernels and waits)")
}

// check fails now, before anything is attached, on a path the outputs
// cannot be written to.
func (p *pictureFlags) check() error {
	if p.html == "" {
		return nil
	}
	if st, err := os.Stat(p.html); err == nil && st.IsDir() {
		return usageErr("--html %s is a directory: give a file name, e.g. %s", p.html, filepath.Join(p.html, "report.html"))
	}
	if st, err := os.Stat(filepath.Dir(p.html)); err != nil || !st.IsDir() {
		return usageErr("--html %s: directory %s does not exist", p.html, filepath.Dir(p.html))
	}
	return nil
}

// pictures collects what the pictures need as the run goes.
type pictures struct {
	flags pictureFlags
	page  *htmlreport.Collector // nil: no --html
}

func openPictures(f pictureFlags) (*pictures, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	p := &pictures{flags: f}
	if f.html != "" {
		p.page = htmlreport.NewCollector()
	}
	return p, nil
}

// taps are the pictures' event taps, outputs their step outputs.
func (p *pictures) taps() []eventTap {
	var t []eventTap
	if p.page != nil {
		t = append(t, p.page)
	}
	return t
}

func (p *pictures) outputs() []control.Output {
	var o []control.Output
	if p.page != nil {
		o = append(o, p.page)
	}
	return o
}

// runInfo is what the page says of the run besides its series.
type runInfo struct {
	title, source string
	attached      float64
	kernels       func(pid uint32) []report.Kernel // nil: not counted
	gpus          []correlate.GPURun
	loss          *report.Loss
}

// close writes the page and says where on w.
func (p *pictures) close(loop *control.Loop, info runInfo, w io.Writer) error {
	var errs []error
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
