package report

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
)

// WriteGPUs prints each sampled GPU over the run (NVML: means, and the
// peak where it matters), then the --group aggregates. views gives, per
// process, the NVML index of each of its CUDA ordinals, where known, to name
// a GPU as the process does.
func WriteGPUs(w io.Writer, runs []correlate.GPURun, groups []correlate.GPUGroup, views map[uint32][]int) {
	if len(runs) == 0 {
		return
	}
	mean := func(s correlate.Stat, f string) string {
		if s.N == 0 {
			return "-"
		}
		return fmt.Sprintf(f, s.Mean)
	}
	rate := func(s correlate.Stat) string {
		if s.N == 0 {
			return "-"
		}
		return Bytes(s.Mean) + "/s"
	}
	table(w, "\nGPUs (NVML, means over the run; sm/tensor/dram are GPM activity 0-1):",
		"gpu\tutil\tsm\ttensor\tdram\tmem used\tpower\ttemp max\tsm clock\tpcie tx/rx\tnvlink tx/rx\t processes",
		len(runs), func(i int) string {
			r := runs[i]
			if r.Samples == 0 {
				return fmt.Sprintf("%d\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t not sampled (%s)", r.GPU.Index, r.GPU.UUID)
			}
			mem := "-"
			if r.MemUsed.N > 0 {
				mem = Bytes(r.MemUsed.Max)
				if r.MemTotal > 0 {
					mem += fmt.Sprintf(" of %s", Bytes(r.MemTotal))
				}
			}
			power := mean(r.PowerW, "%.0fW")
			if r.PowerW.N > 0 && r.PowerLimitW > 0 {
				power += fmt.Sprintf(" of %.0fW", r.PowerLimitW)
			}
			temp := "-"
			if r.TempC.N > 0 {
				temp = fmt.Sprintf("%.0fC", r.TempC.Max)
			}
			pids := make([]string, len(r.PIDs))
			for j, p := range r.PIDs {
				pids[j] = fmt.Sprint(p)
				if ord := slices.Index(views[p], r.GPU.Index); ord >= 0 {
					pids[j] += fmt.Sprintf(" (cuda:%d)", ord)
				}
			}
			return fmt.Sprintf("%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s/%s\t%s/%s\t %s", r.GPU.Index, mean(r.Util, "%.0f%%"),
				mean(r.SMActive, "%.2f"), mean(r.TensorActive, "%.2f"), mean(r.DRAMActive, "%.2f"), mem, power, temp,
				mean(r.SMClockMHz, "%.0fMHz"), rate(r.PCIeTxBps), rate(r.PCIeRxBps), rate(r.NVLinkTxBps), rate(r.NVLinkRxBps),
				strings.Join(pids, " "))
		})
	for _, r := range runs {
		var notes []string
		for _, name := range slices.Sorted(maps.Keys(r.Throttled)) {
			notes = append(notes, fmt.Sprintf("%s in %.0f%% of samples", name, 100*float64(r.Throttled[name])/float64(r.Samples)))
		}
		if events.Has(r.ECCUncorrected) && r.ECCUncorrected > 0 || events.Has(r.ECCCorrected) && r.ECCCorrected > 0 {
			notes = append(notes, fmt.Sprintf("ECC errors while attached: %.0f corrected, %.0f uncorrected", r.ECCCorrected, r.ECCUncorrected))
		}
		for _, x := range r.Xids {
			notes = append(notes, fmt.Sprintf("Xid %d", x))
		}
		if len(notes) > 0 {
			fmt.Fprintf(w, "  gpu %d (%s): %s\n", r.GPU.Index, r.GPU.UUID, strings.Join(notes, "; "))
		}
	}
	table(w, "GPU groups (--group):", "group\tgpus\tutil\tsm\tpower\tmem used\tthrottled gpus\t", len(groups), func(i int) string {
		g := groups[i]
		num := func(v float64, f string) string {
			if !events.Has(v) {
				return "-"
			}
			return fmt.Sprintf(f, v)
		}
		mem := "-"
		if events.Has(g.MemUsed) {
			mem = Bytes(g.MemUsed)
		}
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%d\t", g.Name, intList(g.GPUs), num(g.Util, "%.0f%%"),
			num(g.SMActive, "%.2f"), num(g.PowerW, "%.0fW"), mem, g.Throttled)
	})
}

// intList is "0,2,3".
func intList(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, ",")
}
