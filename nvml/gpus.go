package nvml

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuprof/gpuprof/events"
)

// ParseGPUs parses a GPU list (gpuprof attach --gpus): "all", or NVML
// indexes and ranges such as "0,2-4", checked against the count of GPUs NVML
// sees. It returns the indexes sorted, each once.
func ParseGPUs(spec string, count int) ([]int, error) {
	spec = strings.TrimSpace(spec)
	if count <= 0 {
		return nil, fmt.Errorf("GPU list %q: NVML sees no GPU", spec)
	}
	if spec == "all" {
		all := make([]int, count)
		for i := range all {
			all[i] = i
		}
		return all, nil
	}
	if spec == "" {
		return nil, fmt.Errorf(`empty GPU list: give "all" or NVML indexes such as 0,2-4`)
	}
	var out []int
	for item := range strings.SplitSeq(spec, ",") {
		item = strings.TrimSpace(item)
		lo, hi, err := parseRange(item)
		if err != nil {
			return nil, fmt.Errorf("GPU list %q: %w", spec, err)
		}
		if hi >= count {
			return nil, fmt.Errorf("GPU list %q: GPU %d does not exist: NVML sees %d GPUs (0-%d)", spec, hi, count, count-1)
		}
		for i := lo; i <= hi; i++ {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// parseRange parses "3" or "2-4".
func parseRange(item string) (lo, hi int, err error) {
	a, b, isRange := strings.Cut(item, "-")
	lo, err = parseIndex(a)
	if err == nil && isRange {
		hi, err = parseIndex(b)
	} else {
		hi = lo
	}
	if err != nil {
		return 0, 0, fmt.Errorf("%q is not an index or a range of them (such as 0,2-4)", item)
	}
	if hi < lo {
		return 0, 0, fmt.Errorf("range %q runs backwards", item)
	}
	return lo, hi, nil
}

// parseIndex accepts decimal digits only: no sign, no spaces inside.
func parseIndex(s string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("not an index: %q", s)
	}
	return strconv.Atoi(s)
}

// CUDAView maps a process's CUDA_VISIBLE_DEVICES to the NVML index of each
// CUDA ordinal it gives: entry i of the result is the GPU the process calls
// cuda:i. gpus must be every GPU NVML sees (they are taken in index order).
//
// Entries are NVML indexes, "GPU-<uuid>" or a prefix of one that names a
// single GPU. As CUDA does, the list stops at the first entry that names no
// GPU (so "-1" hides them all) or names one already listed. "" means every
// GPU, in NVML order: CUDA's own order is that where CUDA_DEVICE_ORDER is
// PCI_BUS_ID, and on hosts of one GPU model also by default. MIG instances
// ("MIG-...") are refused: a MIG slice is not a GPU NVML samples.
func CUDAView(visible string, gpus []events.GPU) ([]int, error) {
	byIndex := slices.Clone(gpus)
	slices.SortFunc(byIndex, func(a, b events.GPU) int { return a.Index - b.Index })
	visible = strings.TrimSpace(visible)
	if visible == "" {
		out := make([]int, len(byIndex))
		for i, g := range byIndex {
			out[i] = g.Index
		}
		return out, nil
	}
	out := []int{}
	for entry := range strings.SplitSeq(visible, ",") {
		entry = strings.TrimSpace(entry)
		if strings.HasPrefix(entry, "MIG-") {
			return nil, fmt.Errorf("CUDA_VISIBLE_DEVICES=%s names a MIG instance (%s): MIG is not supported", visible, entry)
		}
		idx, ok := cudaEntry(entry, byIndex)
		if !ok || slices.Contains(out, idx) {
			break
		}
		out = append(out, idx)
	}
	return out, nil
}

// cudaEntry is the NVML index of the GPU one CUDA_VISIBLE_DEVICES entry names.
func cudaEntry(entry string, byIndex []events.GPU) (int, bool) {
	if n, err := parseIndex(entry); err == nil {
		if n < len(byIndex) {
			return byIndex[n].Index, true
		}
		return 0, false
	}
	if !strings.HasPrefix(entry, "GPU-") || len(entry) == len("GPU-") {
		return 0, false
	}
	found, idx := 0, 0
	for _, g := range byIndex {
		if len(g.UUID) >= len(entry) && strings.EqualFold(g.UUID[:len(entry)], entry) {
			found, idx = found+1, g.Index
		}
	}
	return idx, found == 1
}
