package probes

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ianlancetaylor/demangle"
	"golang.org/x/arch/x86/x86asm"

	"github.com/gpuprof/gpuprof/events"
)

// Kernels registered before the attach have no name event: the runtime
// and the driver looked their handles up once, long ago (docs/facts.md
// §7). Their first launch seen names them instead, by its call site: the
// BPF program sends the stack words above the driver's launch entry
// (EV_KERNEL_SITE, once a kernel), and the return addresses among them
// lead out of the driver. Through the runtime (libcudart, or a runtime
// linked in statically: functions named cuda*), the first return address
// past it is in the kernel's host stub, which nvcc names after the kernel
// (__device_stub__<mangled kernel>, or the kernel's own host function
// where the stub was inlined): the kernel's name, whenever it was
// registered. A library calling the driver itself (cuBLAS, cuDNN, Triton's
// launchers) is named instead, with its function where it has a symbol.
//
// A return address is told from a stale word by the call instruction
// before it (x86asm decodes the bytes that end there). Resolving reads
// each file's symbols once, which for libtorch_cuda.so takes seconds: the
// siteNamer runs on a goroutine of its own, and its names join the events
// as markers (core.addMarks), so the event loop never waits for it.
type siteNamer struct {
	syms    *symbolizer
	in      chan events.Event
	out     func(events.Event)
	clock   func() uint64
	pending sync.WaitGroup
	dropped atomic.Uint64 // sites not named: the queue was full
	named   atomic.Uint64
}

// siteQueue bounds the sites waiting to be named: a job's kernels are
// hundreds to a few thousand, each sent once.
const siteQueue = 4096

func newSiteNamer(procRoot string, out func(events.Event), clock func() uint64) *siteNamer {
	return &siteNamer{syms: newSymbolizer(procRoot), in: make(chan events.Event, siteQueue), out: out, clock: clock}
}

// add queues a site; a full queue drops it (counted): the kernel then
// shows by its handle, as before.
func (n *siteNamer) add(ev events.Event) {
	n.pending.Add(1)
	select {
	case n.in <- ev:
	default:
		n.pending.Done()
		n.dropped.Add(1)
	}
}

// run names the queued sites until ctx ends.
func (n *siteNamer) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-n.in:
			if name := n.kernelName(&ev, time.Now()); name != "" {
				e := events.Event{Kind: events.KindKernelName, API: ev.API, PID: ev.PID, TID: ev.TID, Out: ev.Out, Name: name}
				e.Start = n.clock()
				e.End = e.Start
				e.Args[events.KernelNameArg] = events.KernelNameFromSite
				n.out(e)
				n.named.Add(1)
			}
			n.pending.Done()
		}
	}
}

// wait waits, at most d, for the queued sites to be named: at the end of
// a run, so that its last kernels' names make the summary.
func (n *siteNamer) wait(d time.Duration) {
	done := make(chan struct{})
	go func() { n.pending.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// kernelName names the kernel of a site, "" where its words lead nowhere.
//
// Past the runtime's frames, the stack words hold stale return addresses
// too, left by calls the launching code made before (torch checks each
// launch with c10_cuda_check_implementation): a nvcc host stub among the
// words wins over the first return address past the runtime, which names
// the kernel only where no stub is seen (one inlined into its launcher).
//
// The words are taken innermost first and the name decided as soon as it
// can be (siteDecider): a word's symbol is read only where the word is a
// return address, and a file's tables only when such a word lands in it.
// The words past the launch's own caller lead into the code that called
// it, libtorch_cpu.so's for torch, whose tables alone took ~0.4 s of CPU
// at an attach.
func (n *siteNamer) kernelName(ev *events.Event, now time.Time) string {
	debug := slog.Default().Enabled(context.Background(), slog.LevelDebug)
	var d siteDecider
	for i, w := range ev.Native {
		c, ok := n.syms.code(ev.PID, w.Offset, now)
		if !ok || driverLib(c.module) {
			continue
		}
		inst, call := callBefore(c)
		if !call {
			continue
		}
		c = c.withSymbol()
		word := siteWord{c, callee(c, inst)}
		if debug {
			slog.Debug("kernel site word", "handle", fmt.Sprintf("%#x", ev.Out), "word", i, "module", c.module,
				"symbol", c.symbol, "callee", word.callee)
		}
		if name, done := d.add(word, ev.Out); done {
			return name
		}
	}
	return d.name()
}

// siteWord is a return address above the driver's launch entry, and the
// function its call went to where the call's target says.
type siteWord struct {
	c      codeAddr
	callee string
}

// nameFromWords names a kernel from the return addresses above the
// driver's launch entry, innermost first (kernelName).
func nameFromWords(words []siteWord, handle uint64) string {
	var d siteDecider
	for _, w := range words {
		if name, done := d.add(w, handle); done {
			return name
		}
	}
	return d.name()
}

// siteDecider names a kernel from the return addresses above the
// driver's launch entry, given one at a time, innermost first: past the
// runtime's frames, the return address into the runtime's launch entry
// is the launch's own caller; else the first host stub among them, else
// the first return address past the runtime. A first return
// address outside the runtime is a library's own launch (driverCaller).
type siteDecider struct {
	runtime     bool
	stub, first string
}

// add takes the next word; done says the name is decided (name).
func (d *siteDecider) add(w siteWord, handle uint64) (name string, done bool) {
	c, callee := w.c, w.callee
	switch {
	case runtimeLib(c.module) || runtimeFunc(c.symbol):
		d.runtime = true
	case !d.runtime:
		return driverCaller(c, handle), true
	case launchEntry(callee):
		return stubKernel(c), true // the call into the runtime's launch
	case callee != "":
		// A stale word: its call went to another function.
	case d.stub == "" && strings.Contains(c.symbol, stubPrefix):
		d.stub = stubKernel(c)
	case d.first == "":
		d.first = stubKernel(c)
	}
	return "", false
}

// name is the kernel's name from the words given, "" where none named it.
func (d *siteDecider) name() string {
	if d.stub != "" {
		return d.stub
	}
	return d.first
}

// launchEntry says whether a function is one of the runtime's or the
// driver's kernel launch entry points, or the runtime header's template
// around one (cudaLaunchKernel<char>, compiled into the caller's file).
//
// CUDA 13's nvcc has the launching code call __cudaLaunchKernel.
func launchEntry(symbol string) bool {
	name := strings.TrimLeft(demangle.Filter(symbol, demangle.NoParams), "_")
	return strings.HasPrefix(name, "cudaLaunch") || strings.HasPrefix(name, "cuLaunch")
}

func driverLib(module string) bool  { return strings.HasPrefix(module, "libcuda.so") }
func runtimeLib(module string) bool { return strings.HasPrefix(module, "libcudart.so") }

// runtimeFunc says whether a symbol is the CUDA runtime's own, linked in
// statically: its entry points (cudaLaunchKernel) and internals.
// The runtime header's templates (cudaLaunchKernel<char>) are compiled
// into the caller's file, and count as the runtime's too.
func runtimeFunc(symbol string) bool {
	name := demangle.Filter(symbol, demangle.NoParams)
	return strings.HasPrefix(name, "cuda") || strings.HasPrefix(name, "__cudart") || strings.Contains(name, "cudart")
}

// stubPrefix is how nvcc names a kernel's host stub: the prefix, then the
// kernel's mangled name without its leading underscore.
const stubPrefix = "__device_stub__"

// stubKernel is the kernel a runtime launch's host stub names, mangled as
// the driver's own names are.
func stubKernel(c codeAddr) string {
	s := withoutClone(c.symbol)
	if s == "" {
		return fmt.Sprintf("kernel launched from %s+%#x (its host stub has no symbol)", c.module, c.off)
	}
	i := strings.Index(s, stubPrefix)
	if i < 0 {
		// The launching function, a stub inlined into it: it says which
		// operation the kernel is, not the kernel's own name.
		return "kernel launched in " + demangle.Filter(s, demangle.NoParams)
	}
	// In a namespace the stub's name is one identifier of its own
	// mangled name, its length in digits before it.
	ident := s[i:]
	j := i
	for j > 0 && s[j-1] >= '0' && s[j-1] <= '9' {
		j--
	}
	if n, err := strconv.Atoi(s[j:i]); err == nil && i+n <= len(s) {
		ident = s[i : i+n]
	}
	k := strings.TrimPrefix(ident, stubPrefix)
	if strings.HasPrefix(k, "Z") {
		return "_" + k // a mangled name less its leading underscore
	}
	return k
}

// withoutClone is a symbol without the suffix a compiler gives the
// copies it makes of a function (GCC's .constprop.0, .isra.0, .part.0,
// .cold; LLVM's .llvm.123): the function it was made from.
func withoutClone(symbol string) string {
	for _, suffix := range []string{".constprop.", ".isra.", ".part.", ".cold", ".llvm.", ".lto_priv."} {
		if i := strings.Index(symbol, suffix); i > 0 {
			symbol = symbol[:i]
		}
	}
	return symbol
}

// driverCaller names a kernel a library launched through the driver
// itself: by the library, and its function where it has a symbol.
// The handle tells apart the kernels one call site launches (cuBLAS
// launches its many kernels from a few).
func driverCaller(c codeAddr, handle uint64) string {
	if c.symbol == "" {
		return fmt.Sprintf("kernel %#x launched by %s (driver API)", handle, c.module)
	}
	return fmt.Sprintf("kernel %#x launched by %s in %s (driver API)", handle, c.module, demangle.Filter(c.symbol, demangle.NoParams))
}

// callBefore is the call instruction the code at c follows, ok where it
// does (a return address, not a stale word that happens to point into
// code). Its bytes are read from the file the symbolizer keeps open.
func callBefore(c codeAddr) (x86asm.Inst, bool) {
	const longest = 7 // call with a SIB byte and a 32-bit displacement, REX too
	if c.off < longest || c.file == nil {
		return x86asm.Inst{}, false
	}
	b := make([]byte, longest)
	if err := c.file.readCode(b, int64(c.off-longest)); err != nil {
		return x86asm.Inst{}, false
	}
	for k := 2; k <= longest; k++ {
		inst, err := x86asm.Decode(b[longest-k:], 64)
		if err == nil && inst.Op == x86asm.CALL && inst.Len == k {
			return inst, true
		}
	}
	return x86asm.Inst{}, false
}

// callee names the function a call returning to c went to.
func callee(c codeAddr, inst x86asm.Inst) string {
	fs := c.file
	if fs == nil {
		return ""
	}
	ret, ok := fs.vaddr(c.off)
	if !ok {
		return ""
	}
	var target uint64
	switch a := inst.Args[0].(type) {
	case x86asm.Rel:
		target = uint64(int64(ret) + int64(a))
	case x86asm.Mem:
		if a.Base != x86asm.RIP || a.Index != 0 {
			return ""
		}
		target = uint64(int64(ret) + a.Disp) // a GOT slot
	default:
		return ""
	}
	if name, ok := fs.importTable().name(target); ok {
		return name
	}
	if sym := fs.symbolAt(target); sym != nil {
		return fs.table().raw(sym)
	}
	return ""
}
