package events

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/internal/outfile"
)

// A trace is a file of events, one JSON object a line after a header line,
// gzip-compressed when its name ends in ".gz". Entry points are stored by
// name, so a trace outlives changes to the cudaapi table.

// TraceHeader is the first line of a trace.
type TraceHeader struct {
	Format  string   `json:"format"` // always "gpuprof-trace/1"
	Version string   `json:"gpuprof_version"`
	PIDs    []uint32 `json:"pids"`
	// NoLaunchCounts: recorded with attach --no-launches.
	NoLaunchCounts bool `json:"no_launch_counts,omitempty"`
	// UserProbes are the --probe specs, in order: events of user probe i
	// name it "user:i".
	UserProbes []string `json:"user_probes,omitempty"`
	// GPUs are the GPUs NVML sampled every NVMLIntervalNS; their rounds are
	// gpu_samples events.
	GPUs           []GPU  `json:"gpus,omitempty"`
	NVMLIntervalNS uint64 `json:"nvml_interval_ns,omitempty"`
	Note           string `json:"note,omitempty"`
}

const traceFormat = "gpuprof-trace/1"

type traceLine struct {
	Kind          string        `json:"k"`
	API           string        `json:"api,omitempty"`
	PID           uint32        `json:"pid"`
	TID           uint32        `json:"tid"`
	Start         uint64        `json:"s,omitempty"`
	End           uint64        `json:"e"`
	Launches      uint32        `json:"l,omitempty"`
	GraphLaunches uint32        `json:"g,omitempty"`
	LaunchFirst   uint64        `json:"lf,omitempty"`
	LaunchLast    uint64        `json:"ll,omitempty"`
	Args          [5]uint64     `json:"a"`
	Ret           uint64        `json:"r,omitempty"`
	Out           uint64        `json:"o,omitempty"`
	Pool          uint32        `json:"p,omitempty"`
	PoolState     uint32        `json:"ps,omitempty"`
	PoolGets      uint32        `json:"pg,omitempty"`
	Name          string        `json:"n,omitempty"`
	Frames        []PyFrame     `json:"f,omitempty"`
	Native        []NativeFrame `json:"nf,omitempty"`
	GPUs          []GPUSample   `json:"gpus,omitempty"`
}

var kindNames = map[Kind]string{KindCall: "call", KindKernelName: "kernel_name", KindLibLoad: "lib_load",
	KindLaunchProbes: "launch_probes", KindPyWait: "py_wait", KindPyAttached: "py_attached", KindPyGIL: "py_gil",
	KindPool: "pool", KindWrite: "write", KindGPUSamples: "gpu_samples", KindProcess: "process",
	KindXid: "xid", KindCPUSample: "cpu_sample", KindLaunchStack: "launch_stack", KindCallStack: "call_stack", KindOffCPU: "off_cpu",
	KindKernelCount: "kernel_count", KindKernelSite: "kernel_site", KindExec: "exec"}

// TraceName is the kind's name in a trace file.
func (k Kind) TraceName() string { return kindNames[k] }

// noAPI says a kind's events are no entry point's: the GPUs' and the
// processes' own.
func (k Kind) noAPI() bool { return k == KindGPUSamples || k == KindProcess || k == KindXid }

// TraceWriter writes events to a trace file.
type TraceWriter struct {
	f      *os.File
	gz     *gzip.Writer
	buf    *bufio.Writer
	enc    *json.Encoder
	err    error // the first write's failure (a full disk): nothing is written after it
	closed bool
}

// CreateTrace creates path and writes the header.
func CreateTrace(path string, h TraceHeader) (*TraceWriter, error) {
	f, err := outfile.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create trace: %w", err)
	}
	w := &TraceWriter{f: f}
	var out io.Writer = f
	if strings.HasSuffix(path, ".gz") {
		w.gz = gzip.NewWriter(f)
		out = w.gz
	}
	w.buf = bufio.NewWriterSize(out, 1<<16)
	w.enc = json.NewEncoder(w.buf)
	h.Format = traceFormat
	if err := w.enc.Encode(h); err != nil {
		f.Close()
		return nil, fmt.Errorf("write trace header: %w", err)
	}
	return w, nil
}

// Write appends one event.
func (w *TraceWriter) Write(e *Event) error {
	l := traceLine{Kind: kindNames[e.Kind], PID: e.PID, TID: e.TID, Start: e.Start, End: e.End,
		Launches: e.Launches, GraphLaunches: e.GraphLaunches, LaunchFirst: e.LaunchFirst,
		LaunchLast: e.LaunchLast, Args: e.Args, Ret: e.Ret, Out: e.Out, Pool: e.Pool, PoolState: e.PoolState, PoolGets: e.PoolGets, Name: e.Name, Frames: e.Frames, Native: e.Native, GPUs: e.GPUs}
	if a, ok := cudaapi.ByID(e.API); ok && !e.Kind.noAPI() {
		l.API = a.Name
	} else if e.API >= cudaapi.UserBase && !e.Kind.noAPI() {
		l.API = fmt.Sprintf("user:%d", e.API-cudaapi.UserBase)
	}
	if w.err != nil {
		return w.err
	}
	if err := w.enc.Encode(&l); err != nil {
		w.fail(err)
		return w.err
	}
	return nil
}

// fail keeps err, and cuts an uncompressed trace back to its last whole
// line: the events written before stay readable (gpuprof replay). A
// compressed one ends where its stream was cut.
func (w *TraceWriter) fail(err error) {
	if w.gz != nil {
		w.err = fmt.Errorf("%w: the compressed trace ends where it was cut", err)
		return
	}
	w.err = fmt.Errorf("%w: the events before it are kept, whole; no more are written", err)
	if cerr := cutToLastLine(w.f); cerr != nil {
		w.err = errors.Join(err, cerr)
	}
}

// cutToLastLine truncates f after its last newline, looking back at most
// a MiB.
func cutToLastLine(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	from := max(0, st.Size()-1<<20)
	tail := make([]byte, st.Size()-from)
	if _, err := f.ReadAt(tail, from); err != nil {
		return err
	}
	return f.Truncate(from + int64(bytes.LastIndexByte(tail, '\n')+1))
}

// Close flushes and closes the file; called again, it does nothing.
func (w *TraceWriter) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	if w.err != nil {
		return w.f.Close() // the failure was returned by Write
	}
	err := w.buf.Flush()
	if err == nil && w.gz != nil {
		err = w.gz.Close()
	}
	if err != nil {
		w.fail(err)
		err = w.err
	}
	return errors.Join(err, w.f.Close())
}

// ReadTrace reads a whole trace. Events naming an entry point or a kind
// this build does not know are skipped and counted.
func ReadTrace(path string) (TraceHeader, []Event, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return TraceHeader{}, nil, 0, fmt.Errorf("open trace: %w", err)
	}
	defer f.Close()
	var in io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			return TraceHeader{}, nil, 0, fmt.Errorf("read trace %s: %w", path, err)
		}
		defer gz.Close()
		in = gz
	}
	return readTrace(path, in)
}

// readTrace reads the trace called path from in.
func readTrace(path string, in io.Reader) (TraceHeader, []Event, int, error) {
	var h TraceHeader
	dec := json.NewDecoder(bufio.NewReaderSize(in, 1<<16))
	if err := dec.Decode(&h); err != nil || h.Format != traceFormat {
		return h, nil, 0, fmt.Errorf("read trace %s: not a gpuprof trace (header %q)", path, h.Format)
	}
	kinds := map[string]Kind{}
	for k, v := range kindNames {
		kinds[v] = k
	}
	var evs []Event
	unknown := 0
	for {
		var l traceLine
		if err := dec.Decode(&l); err == io.EOF {
			break
		} else if err != nil {
			return h, evs, unknown, fmt.Errorf("read trace %s: event %d: %w", path, len(evs)+unknown+1, err)
		}
		kind, ok := kinds[l.Kind]
		if !ok {
			unknown++ // a kind of a newer gpuprof's
			continue
		}
		e := Event{Kind: kind, PID: l.PID, TID: l.TID, Start: l.Start, End: l.End,
			Launches: l.Launches, GraphLaunches: l.GraphLaunches, LaunchFirst: l.LaunchFirst,
			LaunchLast: l.LaunchLast, Args: l.Args, Ret: l.Ret, Out: l.Out, Pool: l.Pool, PoolState: l.PoolState, PoolGets: l.PoolGets, Name: l.Name, Frames: l.Frames, Native: l.Native, GPUs: l.GPUs}
		n, user := strings.CutPrefix(l.API, "user:")
		switch {
		case kind.noAPI():
			// none, whatever the line says: as Write leaves it out
		case user:
			i, err := strconv.Atoi(n)
			if err != nil || i < 0 || i >= len(h.UserProbes) || i >= 0x7fff { // ParseUserProbe numbers no more
				unknown++
				continue
			}
			e.API = cudaapi.UserBase + uint16(i)
		case l.API != "":
			a, ok := cudaapi.ByName(l.API)
			if !ok {
				unknown++
				continue
			}
			e.API = a.ID
		}
		evs = append(evs, e)
	}
	return h, evs, unknown, nil
}
