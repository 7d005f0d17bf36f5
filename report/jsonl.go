package report

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/internal/outfile"
)

// stepRecord is one line of --jsonl. Field names follow the workloads'
// ground-truth files (step, t_start_ns, t_end_ns, step_time, compute_time,
// ... in seconds) so the two can be compared line by line. compute_time is
// absent, not zero, when nothing measured it.
type stepRecord struct {
	correlate.Step
	ComputeTime *float64 `json:"compute_time,omitempty"`
	// Launch counts are absent for steps in which launches were not
	// counted (--launch-duty).
	Launches      *int `json:"launches,omitempty"`
	GraphLaunches *int `json:"graph_launches,omitempty"`
	OtherLaunches *int `json:"other_launches,omitempty"`
	// graph_kernels where the step launched graphs and every one's
	// kernels are known (correlate.Step.GraphKernelsKnown): graph_launches
	// with no graph_kernels is a graph captured before attach, or while
	// launches were not counted. captured_launches where a capture's
	// launches were counted.
	GraphKernels     *int `json:"graph_kernels,omitempty"`
	CapturedLaunches *int `json:"captured_launches,omitempty"`
	// Device-to-device bytes likewise: those copies are probed with the
	// launches.
	D2DBytes *uint64 `json:"d2d_bytes,omitempty"`
	// Waits are absent where Python waits are not probed, the kinds of
	// wait also where those probes went with the launch probes and were
	// not attached all through the step (the gets still time the dispatch
	// wait); data_time where nothing marked the end of the data phase.
	DispatchWait *float64 `json:"dispatch_wait,omitempty"`
	DataWait     *float64 `json:"data_wait,omitempty"`
	LockWait     *float64 `json:"lock_wait,omitempty"`
	GILWait      *float64 `json:"gil_wait,omitempty"`
	IOWait       *float64 `json:"io_wait,omitempty"`
	FullWait     *float64 `json:"full_wait,omitempty"`
	DataTime     *float64 `json:"data_time,omitempty"`
	// pool and samples are absent where they were not read.
	Pool    *int `json:"pool,omitempty"`
	Samples *int `json:"samples,omitempty"`
	// Phases is the step thread's wall time by phase (correlate.Phase:
	// dispatch_wait, data, sync, compute, other), seconds summing to
	// wall_time: the step breakdown the report plots. Phases the step
	// did not have are absent.
	Phases map[correlate.Phase]float64 `json:"phases,omitempty"`
}

// JSONL writes one JSON object per step.
type JSONL struct {
	f   *os.File
	buf *bufio.Writer
	enc *json.Encoder
	// whole is how many bytes of whole lines the file holds; failed, that
	// a write failed (a full disk), the file cut back to them.
	whole  int64
	failed bool
}

// CreateJSONL creates (or truncates) path.
func CreateJSONL(path string) (*JSONL, error) {
	f, err := outfile.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	buf := bufio.NewWriter(f)
	return &JSONL{f: f, buf: buf, enc: json.NewEncoder(buf)}, nil
}

// Write appends a step. Lines are flushed per step so a reader following
// the file sees whole steps.
func (j *JSONL) Write(s correlate.Step) error {
	r := stepRecord{Step: s}
	if s.ComputeSource != correlate.ComputeNone {
		ct := s.ComputeTime
		r.ComputeTime = &ct
	}
	if s.LaunchesCounted {
		r.Launches, r.GraphLaunches, r.OtherLaunches = &s.Launches, &s.GraphLaunches, &s.OtherLaunches
		r.D2DBytes = &s.D2DBytes
		if s.CapturedLaunches > 0 {
			r.CapturedLaunches = &s.CapturedLaunches
		}
	}
	if s.GraphKernelsKnown && s.GraphLaunches > 0 {
		// With none, graph_launches 0 says so already.
		r.GraphKernels = &s.GraphKernels
	}
	if s.WaitsObserved {
		r.DispatchWait = &s.DispatchWait
	}
	if s.WaitKindsCounted {
		r.DataWait, r.LockWait, r.GILWait, r.IOWait, r.FullWait = &s.DataWait, &s.LockWait, &s.GILWait, &s.IOWait, &s.FullWait
	}
	if s.DataMeasured {
		r.DataTime = &s.DataTime
	}
	if s.PoolMeasured {
		r.Pool = &s.Pool
	}
	if s.SamplesMeasured {
		r.Samples = &s.Samples
	}
	for _, p := range s.Phases {
		if r.Phases == nil {
			r.Phases = map[correlate.Phase]float64{}
		}
		r.Phases[p.Phase] += float64(p.EndNS-p.StartNS) / 1e9
	}
	if j.failed {
		return errors.New("write step: an earlier write failed")
	}
	if err := j.enc.Encode(r); err != nil {
		return fmt.Errorf("write step: %w", err)
	}
	n := j.buf.Buffered()
	if err := j.buf.Flush(); err != nil {
		// What was written before stays readable: no half line at its
		// end.
		j.failed = true
		if terr := j.f.Truncate(j.whole); terr != nil {
			return errors.Join(err, terr)
		}
		return fmt.Errorf("%w: the steps before it are kept, whole; no more are written", err)
	}
	j.whole += int64(n)
	return nil
}

// Close flushes and closes the file.
func (j *JSONL) Close() error {
	if j.failed {
		return j.f.Close() // the failure was returned by Write
	}
	return errors.Join(j.buf.Flush(), j.f.Close())
}
