package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/nvml"
)

// gpusCmd prints the GPUs' hardware state as gpuprof reads it (NVML), like
// nvidia-smi, with GPM activity: two rounds an interval apart, since GPM
// and per-process figures are rates between rounds.
func gpusCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("gpus", stderr)
	interval := fs.Duration("interval", 200*time.Millisecond, "time between the two readings GPM activity is taken over")
	asJSON := fs.Bool("json", false, "one JSON object per GPU")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *interval <= 0 {
		return usageErr("--interval %v: give a positive duration, e.g. 200ms", *interval)
	}
	s, err := nvml.New(nvml.Open(), nvml.Config{Interval: *interval})
	if err != nil {
		return err
	}
	defer s.Close()
	s.Sample()
	time.Sleep(*interval)
	round := s.Sample()
	gpus := map[int]events.GPU{}
	for _, g := range s.GPUs() {
		gpus[g.Index] = g
	}
	for _, r := range round {
		if *asJSON {
			if err := json.NewEncoder(stdout).Encode(gpuRecord(gpus[r.GPU], r)); err != nil {
				return err
			}
			continue
		}
		writeGPU(stdout, gpus[r.GPU], r)
	}
	return nil
}

// gpuRecord is a sample as JSON, with the GPU's identity: fields not read
// are left out.
func gpuRecord(g events.GPU, r events.GPUSample) map[string]any {
	m := r.Fields()
	m["index"], m["uuid"], m["name"], m["bus_id"] = g.Index, g.UUID, g.Name, g.BusID
	return m
}

func writeGPU(w io.Writer, g events.GPU, r events.GPUSample) {
	num := func(v float64, f string) string {
		if math.IsNaN(v) {
			return "-"
		}
		return fmt.Sprintf(f, v)
	}
	fmt.Fprintf(w, "GPU %d %s %s (%s)\n", g.Index, g.Name, g.UUID, g.BusID)
	fmt.Fprintf(w, "  util %s  mem util %s  mem %s of %s  power %s of %s  temp %s  clocks sm %s mem %s\n",
		num(r.GPUUtil, "%.0f%%"), num(r.MemUtil, "%.0f%%"), num(r.MemUsed/(1<<20), "%.0fMiB"), num(r.MemTotal/(1<<20), "%.0fMiB"),
		num(r.PowerW, "%.0fW"), num(r.PowerLimitW, "%.0fW"), num(r.TempC, "%.0fC"), num(r.SMClockMHz, "%.0fMHz"),
		num(r.MemClockMHz, "%.0fMHz"))
	fmt.Fprintf(w, "  GPM: sm active %s  occupancy %s  tensor %s  dram %s  nvlink tx %s rx %s  pcie tx %s rx %s\n",
		num(r.SMActive, "%.2f"), num(r.SMOccupancy, "%.2f"), num(r.TensorActive, "%.2f"), num(r.DRAMActive, "%.2f"),
		num(r.NVLinkTxBps/(1<<20), "%.0fMiB/s"), num(r.NVLinkRxBps/(1<<20), "%.0fMiB/s"),
		num(r.PCIeTxBps/(1<<20), "%.0fMiB/s"), num(r.PCIeRxBps/(1<<20), "%.0fMiB/s"))
	if r.ThrottleKnown {
		fmt.Fprintf(w, "  throttle reasons %#x\n", r.Throttle)
	}
	for _, p := range r.Procs {
		fmt.Fprintf(w, "  process %d: mem %s sm util %s\n", p.PID, num(p.MemUsed/(1<<20), "%.0fMiB"), num(p.SMUtil, "%.0f%%"))
	}
}
