package probes

import (
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/internal/testenv"
)

// BenchmarkStackReads measures what reading stacks costs the programs
// that read them, by the kernel's BPF statistics (run time per run), on
// the stand-in pipeline under pyenv's 3.12 (compute mode: 100 launches
// and a sync a step): the same loop attached without stacks, and with
// every stack read (a launch stack at every launch, the stacks of every
// sync and copy, CPU samples at 97 Hz). A launch's or a call's stack
// read is the difference between the two runs' programs; a CPU sample's
// is cpu_sample's whole run.
//
//	sudo go test -run '^$' -bench StackReads -benchtime 1x ./probes
func BenchmarkStackReads(b *testing.B) {
	testenv.RequireRoot(b)
	python := testenv.EndToEndPython(b)
	dir := testenv.Fixtures(b)
	script := filepath.Join(testenv.Root(), "testdata", "python", "pipeline.py")
	perRun := func(stacks StackConfig) map[string]float64 {
		cfg := DefaultConfig()
		cfg.Launches, cfg.ProgramStats, cfg.Stacks = true, true, stacks
		s, err := Open(cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		cmd := exec.Command(python, script, dir, "--mode", "compute", "--steps", "200", "--truth",
			filepath.Join(b.TempDir(), "truth.jsonl"), "--start-delay", "0.5")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		time.Sleep(300 * time.Millisecond)
		if _, err := s.Attach(cmd.Process.Pid); err != nil {
			b.Fatal(err)
		}
		if _, err := runFor(b, s, 60*time.Second); !errors.Is(err, ErrTargetsExited) {
			b.Fatal(err)
		}
		out := map[string]float64{}
		for _, st := range s.objs.ProgramStats() {
			if st.Runs > 0 {
				out[st.Name] = float64(st.Runtime.Nanoseconds()) / float64(st.Runs)
			}
		}
		return out
	}
	var off, on map[string]float64
	for b.Loop() {
		off = perRun(StackConfig{})
		on = perRun(StackConfig{CPUHz: 97, LaunchEvery: 1, Calls: true})
	}
	launch := on["launch_entry"] - off["launch_entry"]
	call := on["api_return"] - off["api_return"]
	b.Logf("ns a run, by BPF statistics: launch_entry %.0f without stacks, %.0f reading every launch's stack (+%.0f);"+
		" api_return %.0f, %.0f reading every sync's and copy's (+%.0f); cpu_sample %.0f a sample",
		off["launch_entry"], on["launch_entry"], launch, off["api_return"], on["api_return"], call, on["cpu_sample"])
	b.ReportMetric(launch, "launch-stack-ns")
	b.ReportMetric(call, "call-stack-ns")
	b.ReportMetric(on["cpu_sample"], "cpu-sample-ns")
}
