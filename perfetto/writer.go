package perfetto

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/internal/outfile"
)

// DefaultMaxBytes is the file's bound where Options.MaxBytes is 0.
const DefaultMaxBytes = 256 << 20

// originSlackNS is how far before the first time seen the clock origin
// is put: events come about in the order they end, so a slice that began
// a little before the first one ended still has a ts of 0 or more
// (Perfetto refuses negative ones).
const originSlackNS = 1_000_000_000

// Options say how a Writer names what it writes and how much it may.
type Options struct {
	// User names the --probe functions by their event API ID (cudaapi.UserBase on): role and name.
	User map[uint16]correlate.UserProbe
	// ThreadName, where set, names a thread (live: /proc/PID/task/TID/comm); nil in a replay.
	ThreadName func(pid, tid uint32) string
	// MaxBytes bounds the file (0: DefaultMaxBytes, 256 MiB): past it nothing more is written but the closing metadata, and Stats says so.
	MaxBytes int64
}

// Stats says what a Writer has written.
type Stats struct {
	Steps    int // step slices
	Slices   int // all slices ("X" events): steps, their phases, the threads'
	Counters int // counter values ("C" events)
	// Overlaps are the slices put on an overlaps lane of their thread
	// (or of the process's steps) because they crossed one on its track.
	Overlaps int
	// Dropped are the slices not written: ending before they began,
	// beginning before the clock origin, or fitting no lane.
	Dropped int
	Bytes   int64 // written to the file so far
	// Truncated says MaxBytes was reached: from AtNS (CLOCK_MONOTONIC ns,
	// the time of the first event left out) on, nothing was written.
	Truncated bool
	AtNS      uint64
}

// Writer writes a trace file from a job's events and steps as they come.
// It is not safe for concurrent use: its caller calls it from one
// goroutine at a time (gpuprof's loop holds a lock), so it has none of its
// own.
type Writer struct {
	out  *bufio.Writer
	file *os.File // where Create made it: Close closes it
	err  error    // the first write error, which stops all writing
	max  int64

	threadName func(pid, tid uint32) string
	userNames  map[uint16]string
	waits      waitTexts

	started bool   // the header is out: origin is fixed
	origin  uint64 // CLOCK_MONOTONIC ns at ts 0
	last    uint64 // the latest time seen, where notes go
	notes   []string
	written int // events in traceEvents so far
	ev      enc

	procs  map[uint32]*proc
	gpus   bool // GPU counters were written
	synth  uint32
	stats  Stats
	closed bool
}

// Create creates the file at path and returns a Writer to it.
func Create(path string, o Options) (*Writer, error) {
	f, err := outfile.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create trace file: %w", err)
	}
	w := New(f, o)
	w.file = f
	return w, nil
}

// New returns a Writer to out.
func New(out io.Writer, o Options) *Writer {
	w := &Writer{out: bufio.NewWriterSize(out, 1<<16), max: o.MaxBytes, threadName: o.ThreadName,
		userNames: map[uint16]string{}, procs: map[uint32]*proc{}}
	if w.max <= 0 {
		w.max = DefaultMaxBytes
	}
	for id, u := range o.User {
		w.userNames[id] = string(u.Role) + ": " + u.Name
	}
	return w
}

// Stats says what has been written so far.
func (w *Writer) Stats() Stats { return w.stats }

// write hands b to the file, counting it; after an error, nothing.
func (w *Writer) write(b []byte) {
	if w.err != nil {
		return
	}
	n, err := w.out.Write(b)
	w.stats.Bytes += int64(n)
	if err != nil {
		w.err = fmt.Errorf("write trace file: %w", err)
	}
}

// writeString is write of a constant, without making it a []byte.
func (w *Writer) writeString(s string) {
	if w.err != nil {
		return
	}
	n, err := w.out.WriteString(s)
	w.stats.Bytes += int64(n)
	if err != nil {
		w.err = fmt.Errorf("write trace file: %w", err)
	}
}

// see takes t, a time an event holds: the first fixes the clock origin
// and the header goes out; the latest is where notes go.
func (w *Writer) see(t uint64) {
	if t == 0 {
		return // a time not known (a process event)
	}
	w.last = max(w.last, t)
	if !w.started {
		w.begin(t)
	}
}

// seeSpan sees an event's times, its start first: the first event may
// have begun well before others ended.
func (w *Writer) seeSpan(start, end uint64) {
	if start != 0 && start <= end {
		w.see(start)
	}
	w.see(end)
}

// begin writes the header, with the clock origin a little before t and
// on a whole millisecond, so that ts's decimals are t_ns's last digits.
func (w *Writer) begin(t uint64) {
	w.started = true
	if t > originSlackNS {
		w.origin = (t - originSlackNS) / 1_000_000 * 1_000_000
	}
	b := []byte(`{"displayTimeUnit":"ns","otherData":{"clock":"CLOCK_MONOTONIC","clock_origin_ns":`)
	b = strconv.AppendUint(b, w.origin, 10)
	b = append(b, `,"ts_unit":"microseconds from clock_origin_ns","generator":"gpuprof"},"traceEvents":[`+"\n"...)
	w.write(b)
	notes := w.notes
	w.notes = nil
	for _, n := range notes {
		w.Note(n)
	}
}

// emit writes the events built in w.ev, all of them or, where they would
// take the file past its bound, none, and nothing from then on: at is the
// time they hold, where Stats says the file stopped.
func (w *Writer) emit(at uint64) bool {
	if w.ev.count == 0 || w.err != nil || w.stats.Truncated {
		return false
	}
	n := int64(len(w.ev.b))
	if w.written > 0 {
		n += 2
	}
	if w.stats.Bytes+n > w.max {
		w.stats.Truncated, w.stats.AtNS = true, at
		return false
	}
	if w.written > 0 {
		w.writeString(",\n")
	}
	w.write(w.ev.b)
	w.written += w.ev.count
	return w.err == nil
}

// stopped says no more events go out: the bound was reached, or a write
// failed.
func (w *Writer) stopped() bool { return w.stats.Truncated || w.err != nil || w.closed }

func (w *Writer) newTID() uint32 {
	w.synth++
	return synthBase + w.synth
}

func (w *Writer) proc(pid uint32) *proc {
	p := w.procs[pid]
	if p == nil {
		p = &proc{pid: pid, threads: map[uint32]*thread{}}
		w.procs[pid] = p
	}
	return p
}

func (w *Writer) thread(p *proc, tid uint32) *thread {
	t := p.threads[tid]
	if t == nil {
		t = &thread{tid: tid, lanes: lanes{{tid: tid}}}
		if w.threadName != nil {
			t.name = w.threadName(p.pid, tid)
		}
		p.threads[tid] = t
	}
	return t
}

// Close writes the closing metadata (the processes' and threads' names
// and order) and the end of the JSON, and closes the file where Create
// made it. It returns the first error writing met.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	if !w.started {
		w.begin(0)
	}
	w.ev.reset()
	if w.stats.Truncated {
		w.cutNote()
	}
	w.metadata()
	if w.written > 0 && w.ev.count > 0 {
		w.writeString(",\n")
	}
	w.write(w.ev.b)
	w.writeString("\n]}\n")
	w.closed = true
	if err := w.out.Flush(); err != nil && w.err == nil {
		w.err = fmt.Errorf("write trace file: %w", err)
	}
	if w.file != nil {
		if err := w.file.Close(); err != nil {
			w.err = errors.Join(w.err, fmt.Errorf("close trace file: %w", err))
		}
	}
	return w.err
}
