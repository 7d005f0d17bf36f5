//go:build ignore

// gpuprof's probes: paired entry/return uprobes on CUDA calls and entry-only
// counting probes on kernel launches. One event per completed call goes to a
// ring buffer without waking the reader; launches are counted in the kernel
// and ride along on the thread's next event.

#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

// Record kinds, the first byte of every ring buffer record. bpf2go
// generates them into Go (bpf.Kind*); probes/decode.go maps each to the
// events kind it decodes to, and its test holds that map to this enum.
enum event_kind {
	EV_CALL = 1,
	EV_KERNEL_NAME = 2,
	EV_LIB_LOAD = 3,
	EV_PY_WAIT = 5,
	EV_PY_GIL = 6,
	EV_WRITE = 7,
	EV_STACK = 8, // a stack sample, in the stacks ring buffer (enum stack_reason says why)
	EV_KERNEL_SITE = 9, // a kernel's first launch seen: the stack words it was launched with
};

// Why a stack was read (struct stack_event's reason): generated into Go
// (bpf.Stack*).
enum stack_reason {
	STACK_CPU = 1,    // the thread was on a CPU at a cpu-clock sample
	STACK_LAUNCH = 2, // the thread launched a kernel
	STACK_CALL = 3,   // the thread returned from a CUDA call that held it (a sync, a copy)
	STACK_OFFCPU = 4, // the thread ran again after a stretch off CPU
};

// struct stack_event's flags: generated into Go (bpf.StackFlag*).
enum stack_flag {
	// The thread was inside a probed call (a CUDA call, a Python wait, the
	// GIL after one): its time may be a probed wait's, reported apart.
	STACK_FLAG_IN_CALL = 1,
	// Off CPU: the thread was still runnable (preempted), not blocked.
	STACK_FLAG_RUNNABLE = 2,
	// Off CPU in pthread_cond_timedwait, which in a Python thread is
	// CPython's take_gil: waiting to take the GIL.
	STACK_FLAG_COND_WAIT = 4,
};

// Attach cookie layout: each field of the 64-bit cookie a CUDA call's
// probe is attached with, as its shift and its mask (the field's width).
// bpf2go generates them into Go (bpf.Cookie*), from which probes/cookie.go
// packs every cookie; here they are compile-time constants, as literals
// would be. (A Python wait probe's cookie is, whole, which wait function
// it is on: probes/cookie.go waitCookie.)
enum cookie_layout {
	COOKIE_API_SHIFT = 0, // the entry point's cudaapi ID
	COOKIE_API_MASK = 0xffff,
	COOKIE_LAYER_SHIFT = 16, // enum layer
	COOKIE_LAYER_MASK = 0xf,
	COOKIE_OUT_SHIFT = 20, // enum out_kind: what to read through the output pointer
	COOKIE_OUT_MASK = 0xf,
	COOKIE_OUT_ARG_SHIFT = 24, // the output pointer's argument, COOKIE_NO_ARG: none
	COOKIE_OUT_ARG_MASK = 0xf,
	COOKIE_FUNC_ARG_SHIFT = 28, // the launch argument that is the kernel (0 or 1)
	COOKIE_FUNC_ARG_MASK = 0xf,
	// The name's argument + 1; 0: no name event, COOKIE_NO_ARG: a name
	// event without a name (a handle mapped to a kernel named before).
	COOKIE_NAME_ARG_SHIFT = 32,
	COOKIE_NAME_ARG_MASK = 0xf,
	COOKIE_GRAPH_SHIFT = 40, // a graph launch
	COOKIE_GRAPH_MASK = 1,
	// The kind of call a runtime call shares with the driver's, 0: none
	// (probes/twins.go).
	COOKIE_TWIN_SHIFT = 44,
	COOKIE_TWIN_MASK = 3,
	// Note the caller: a runtime record's function, not its call site
	// (probes/recordsites.go).
	COOKIE_CALLER_SHIFT = 48,
	COOKIE_CALLER_MASK = 1,
	// Read the thread's stacks at return when the call held it at least
	// stack_call_min_ns (the wait profile's syncs and copies).
	COOKIE_STACK_SHIFT = 52,
	COOKIE_STACK_MASK = 1,
	COOKIE_NO_ARG = 0xf, // an argument field naming no argument (>= NARGS)
};

#define COOKIE_FIELD(c, f) (((c) >> COOKIE_##f##_SHIFT) & COOKIE_##f##_MASK)
#define COOKIE_API(c) COOKIE_FIELD(c, API)
#define COOKIE_LAYER(c) COOKIE_FIELD(c, LAYER)
#define COOKIE_OUT(c) COOKIE_FIELD(c, OUT)
#define COOKIE_OUT_ARG(c) COOKIE_FIELD(c, OUT_ARG)
#define COOKIE_FUNC_ARG(c) COOKIE_FIELD(c, FUNC_ARG)
#define COOKIE_NAME_ARG(c) COOKIE_FIELD(c, NAME_ARG)
#define COOKIE_GRAPH(c) COOKIE_FIELD(c, GRAPH)
#define COOKIE_TWIN(c) COOKIE_FIELD(c, TWIN)
#define COOKIE_CALLER(c) COOKIE_FIELD(c, CALLER)
#define COOKIE_STACK(c) COOKIE_FIELD(c, STACK)

// A cookie's layer: cudaapi.Layer's values (probes/cookie_test.go).
enum layer {
	LAYER_RUNTIME = 1,
	LAYER_DRIVER = 2,
	LAYER_USER = 4,
};

// What a call's return reads through its output pointer: cudaapi.Out's
// values (probes/cookie_test.go).
enum out_kind {
	OUT_U32 = 1,
	OUT_U64 = 2,
};

#define NARGS 5
#define NAME_LEN 128

// Counters in the stats array, generated into Go (bpf.Stat*).
enum stat {
	STAT_RINGBUF_FULL,
	STAT_KERNEL_MAP_FULL,
	STAT_STALE_CALL,
	STAT_NO_THREAD_STATE,
	STAT_STACKS_FULL, // stack samples dropped: the stacks ring buffer was full
	NSTATS,
};

struct event {
	__u8 kind;
	__u8 layer;
	__u16 api;
	__u32 pid;
	__u32 tid;
	__u32 launches;      // kernel launches on this thread since its previous event
	__u32 graph_launches;
	__u32 pool;          // the thread's sample pool length + 1 at return; 0: not read
	__u64 start_ns;
	__u64 end_ns;
	__u64 launch_first_ns;
	__u64 launch_last_ns;
	__u64 args[NARGS];
	__u64 ret;
	__u64 out;           // value read through an output pointer at return
	__u32 pool_state;    // the pool's append+pop counter + 1 (a deque's state), 0: not read
	__u32 pool_gets;     // items taken from the pool + 1 (a multiprocessing queue's reads), 0: not counted
};

struct name_event {
	__u8 kind;
	__u8 layer;
	__u16 api;
	__u32 pid;
	__u32 tid;
	__u32 pad;
	__u64 ts_ns;
	__u64 handle;        // the CUfunction / CUkernel handle returned
	__u64 arg;           // the CUkernel a function was taken from, if any
	char name[NAME_LEN];
};

// The stack words above the driver's launch entry at a kernel's first
// launch seen (struct site_event): the return addresses among them lead
// to the host stub that launched it through the runtime, or to the
// library that called the driver, which name the kernel however long
// before the attach it was registered (probes/kernelsite.go). 96 words
// hold the runtime's frames between the stub and the driver.
#define SITE_WORDS 96

struct site_event {
	__u8 kind; // EV_KERNEL_SITE
	__u8 pad0;
	__u16 api;     // the launch entry point's cudaapi ID
	__u32 pid;
	__u32 tid;
	__u32 nwords;  // words read from the stack pointer up (0: none could be)
	__u64 ts_ns;
	__u64 handle;  // the kernel's handle, as launches count it
	__u64 words[SITE_WORDS];
};

// One call in flight on a thread, per layer. sp is the stack pointer at
// entry (pointing at the return address): a nested call has a lower sp, and
// the matching return comes back with sp just above it.
struct call_slot {
	__u64 start_ns;
	__u64 sp;
	__u64 cookie;
	__u64 gen; // its twin group's rt_gen at entry (runtime calls)
	__u64 args[NARGS];
};

struct thread_state {
	struct call_slot rt;
	struct call_slot drv;
	struct call_slot user; // a function the user named (--probe)
	struct call_slot py;  // a semaphore wait in a Python process
	struct call_slot gil; // a condition wait right after one: taking the GIL back
	__u64 py_wait_end;    // when the thread's last reported Python wait ended
	__u64 py_tstate;      // the thread's PyThreadState, as last found
	__u64 instant_arg;    // the first argument of the thread's last runtime instant call
	__u64 instant_ns;     // and when it was made (0: its driver twin was seen)
	__u64 launch_first_ns;
	__u64 launch_last_ns;
	__u32 launches;
	__u32 graph_launches;
	__u32 launch_stack_n; // launches since the thread's last launch stack
	__u8 off_runnable;    // it left its CPU still runnable (preempted)
	__u8 in_cond;         // in pthread_cond_timedwait (gil_entry): CPython's take_gil
	__u16 pad;
	__u64 off_ns; // when it left its CPU in a system call (0: on one, or not seen leaving)
};

struct kernel_key {
	__u32 pid;
	__u32 pad;
	__u64 func;
};

// Where CPython keeps what the frame walk needs, for one process (its
// version's struct offsets and the address of _PyRuntime). probes/python.go
// fills it; -1 marks a field the version does not have.
struct py_layout {
	__u64 runtime;        // &_PyRuntime in the process
	__u32 interp_main;    // _PyRuntime.interpreters.main
	__u32 threads_head;   // PyInterpreterState: first thread state
	__u32 tstate_next;    // PyThreadState.next
	__u32 tstate_id;      // native_thread_id, or thread_id (pthread_self) if id_is_pthread
	__u32 tstate_frame;   // PyThreadState: frame (3.10), cframe (3.11-3.12), current_frame (3.13)
	__s32 cframe_current; // _PyCFrame.current_frame, or -1
	__u32 frame_code;     // f_code / f_executable
	__u32 frame_previous; // f_back / previous
	__s32 frame_owner;    // owner, or -1
	__u32 id_is_pthread;
	__u32 frame_locals;   // f_localsplus / localsplus: the arguments, self first
	__u32 learning;       // 1 while gpuprof looks for the process's sample pool: waits from py_learn_wait_ns are reported
};

#define PY_FRAMES 8
// A frame's first PY_FRAME_HEAD bytes are read at once: its code, previous
// frame and owner, and from 3.11 its first local. One read a frame, and no
// strings: gpuprof reads the code objects' names from user space (one BPF
// read of user memory costs ~100-200 ns on the GPU host; reading eight
// frames' names and files took a wait's return ~15 µs).
#define PY_FRAME_HEAD 80
#define PY_MAX_THREADS 256

struct py_frame {
	__u64 code; // the code object (f_code / f_executable): gpuprof reads its names
	__u64 self; // the first local: a method's self
};

// A Python thread blocked on a lock: which functions were waiting, from the
// innermost frame out, and for how long.
struct py_event {
	__u8 kind;
	__u8 nframes;
	__u16 wait; // which wait function: the probe's cookie (probes/python.go)
	__u32 pid;
	__u32 tid;
	__u32 ret; // the wait function's return value
	__u64 start_ns;
	__u64 end_ns;
	__u64 arg0; // its first argument (select's nfds: 0 for a sleep)
	struct py_frame frames[PY_FRAMES];
};

// Force the generated Go types.
const struct event *unused_event __attribute__((unused));
const struct name_event *unused_name_event __attribute__((unused));
const struct site_event *unused_site_event __attribute__((unused));
const struct kernel_key *unused_kernel_key __attribute__((unused));
const struct py_layout *unused_py_layout __attribute__((unused));
const struct py_event *unused_py_event __attribute__((unused));
const struct pool_word *unused_pool_word __attribute__((unused));
const struct wait_key *unused_wait_key __attribute__((unused));
const struct wait_count *unused_wait_count __attribute__((unused));
const struct twin_key *unused_twin_key __attribute__((unused));
const enum event_kind *unused_event_kind __attribute__((unused));
const enum cookie_layout *unused_cookie_layout __attribute__((unused));
const enum layer *unused_layer __attribute__((unused));
const enum out_kind *unused_out_kind __attribute__((unused));
const enum stat *unused_stat __attribute__((unused));
const enum stack_reason *unused_stack_reason __attribute__((unused));
const enum stack_flag *unused_stack_flag __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} events SEC(".maps");

// Per-thread state lives in task storage, so it goes away with the thread.
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct thread_state);
} threads SEC(".maps");

// Launch counts per process and kernel handle, per CPU: threads launching
// the same kernel on different CPUs do not fight over one counter. Not
// preallocated: a preallocated per-CPU hash allocates every entry's
// per-CPU value at its creation (65 ms of the kernel's CPU at each start
// on the 2-vCPU dev VM, and its memory times the CPUs), where a job
// launches hundreds to a few thousand kernels; an entry is allocated at
// a kernel's first launch, once.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1 << 16);
	__type(key, struct kernel_key);
	__type(value, __u64);
} kernels SEC(".maps");

// CPython layouts, by process.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct py_layout);
} python SEC(".maps");

// Python wait probe hits by process, function and thread (main or not),
// counted only with count_waits: which waits a job's probes trap, and how
// many of them read frames.
struct wait_key {
	__u32 pid;
	__u16 cookie;
	__u8 main; // the process's main thread
	__u8 pad;
};

struct wait_count {
	__u64 hits;     // entry probe runs
	__u64 reported; // waits long enough to read frames and report
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC); // as kernels: its entries are few
	__uint(max_entries, 4096);
	__type(key, struct wait_key);
	__type(value, struct wait_count);
} wait_hits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NSTATS);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

// A kind's ring-buffer-full drops on one CPU: how many in all (exact),
// and the current run of them, drops no more than LOSS_GAP_NS apart: when
// it began, its latest, how many. The reader turns the runs into the
// spans of time a loss covers (probes/losses.go), for the steps they
// overlap to be marked.
struct loss {
	__u64 count;
	__u64 run;
	__u64 first_ns;
	__u64 last_ns;
};

#define LOSS_GAP_NS 10000000ULL
#define LOSS_KINDS 16 // above every enum event_kind

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LOSS_KINDS);
	__type(key, __u32);
	__type(value, struct loss);
} losses SEC(".maps");

// Driver calls made underneath a runtime call of the same kind, by process
// and driver entry point: whether the driver's probes see every runtime
// call, so that the runtime's can go (probes/twins.go).
struct twin_key {
	__u32 pid;
	__u16 api;
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC); // as kernels: its entries are few
	__uint(max_entries, 4096);
	__type(key, struct twin_key);
	__type(value, __u64);
} twin_hits SEC(".maps");

// rt_gen is raised by gpuprof each time it detaches runtime probes: a
// runtime call whose return will never be seen then stops counting as in
// flight, which would hide the thread's later driver calls as its own.
// One generation per twin group (COOKIE_TWIN; 0, calls of none, is never
// raised): a call of a group still probed at both layers stays in flight.
// With one for all, an elapsed-time read in flight as the copies' runtime
// probes went had its driver twin taken for a read made straight to the
// driver, and that one read decided the event calls for the driver.
volatile __u64 rt_gen[COOKIE_TWIN_MASK + 1];

// rt_gen_of is the generation of a runtime call with this cookie.
static __always_inline __u64 rt_gen_of(__u64 cookie)
{
	return rt_gen[COOKIE_TWIN(cookie)];
}

// Wake the reader only when this many bytes wait; below it the reader polls.
volatile const __u64 wakeup_bytes = 1 << 20;

// Python lock waits shorter than this are not reported.
volatile const __u64 py_min_wait_ns = 50000;

// Except, from this long on, in a process gpuprof is looking for the
// sample pool of (py_layout.learning; probes/poollearn.go). py_learning
// counts those processes: with none, a short wait costs one more load.
volatile const __u64 py_learn_wait_ns = 5000;
volatile __u64 py_learning = 0;

// count_waits turns on wait_hits (--probe-stats); off, the verifier drops
// the counting as dead code.
volatile const __u8 count_waits = 0;

// py_read_cookie is the cookie of the wait probe on the interpreter's
// _Py_read (probes/python.go readCookie).
volatile const __u64 py_read_cookie = 9;

// The task fields read through BTF (CO-RE): fsbase is pthread_self() on
// x86-64, which CPython 3.10 keeps as the thread's id.
struct thread_struct {
	unsigned long fsbase;
} __attribute__((preserve_access_index));
struct task_struct {
	struct thread_struct thread;
} __attribute__((preserve_access_index));

// count adds one to a counter: this CPU's slot, atomically, for a
// program preempted on this CPU by another (uprobes run preemptible) must
// not lose the other's count: what is lost is counted exactly.
static __always_inline void count(__u32 stat)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &stat);
	if (v)
		__sync_fetch_and_add(v, 1);
}

// lost counts an event of kind the events ring buffer had no room for:
// in the total (STAT_RINGBUF_FULL), by kind, and when (struct loss).
static __always_inline void lost(__u32 kind)
{
	count(STAT_RINGBUF_FULL);
	struct loss *l = bpf_map_lookup_elem(&losses, &kind);
	if (!l)
		return;
	__u64 now = bpf_ktime_get_ns();
	if (now - l->last_ns > LOSS_GAP_NS) {
		l->first_ns = now;
		l->run = 0;
	}
	l->last_ns = now;
	__sync_fetch_and_add(&l->run, 1);
	__sync_fetch_and_add(&l->count, 1);
}

// lookup_or_init is a counter map's value for key, put in as zero (this
// CPU's slot) if it was not there; NULL if the map is full.
static __always_inline void *lookup_or_init(void *map, const void *key, const void *zero)
{
	void *v = bpf_map_lookup_elem(map, key);
	if (v)
		return v;
	bpf_map_update_elem(map, key, zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(map, key);
}

// count_wait adds one to the calling thread's hits (or reports) of a wait
// function.
static __always_inline void count_wait(__u64 cookie, int reported)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct wait_key k = {.pid = id >> 32, .cookie = cookie, .main = (__u32)id == id >> 32};
	struct wait_count zero = {};
	struct wait_count *h = lookup_or_init(&wait_hits, &k, &zero);
	if (!h)
		return;
	if (reported)
		h->reported++;
	else
		h->hits++;
}

// rt_in_flight says whether a runtime call is running underneath which a
// call at sp is made.
static __always_inline int rt_in_flight(struct thread_state *ts, __u64 sp)
{
	return ts->rt.start_ns && ts->rt.sp > sp && ts->rt.gen == rt_gen_of(ts->rt.cookie);
}

// count_twin counts a driver call made underneath a runtime call of the
// same kind (cookie: the driver probe's; outer: the runtime call's).
static __always_inline void count_twin(__u64 cookie, __u64 outer)
{
	if (!COOKIE_TWIN(cookie) || COOKIE_TWIN(cookie) != COOKIE_TWIN(outer))
		return;
	struct twin_key k = {.pid = bpf_get_current_pid_tgid() >> 32, .api = COOKIE_API(cookie)};
	__u64 zero = 0;
	__u64 *n = lookup_or_init(&twin_hits, &k, &zero);
	if (n)
		*n += 1;
}

static __always_inline __u64 ringbuf_flags(void)
{
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes)
		return BPF_RB_FORCE_WAKEUP;
	return BPF_RB_NO_WAKEUP;
}

static __always_inline struct thread_state *thread_state(int create)
{
	struct thread_state *ts = bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0,
						       create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	if (!ts && create)
		count(STAT_NO_THREAD_STATE);
	return ts;
}

// Stack samples, for the profiles (profiles/): the native stack by frame
// pointers (bpf_get_stack) and the Python frames' code objects, read at a
// cpu-clock sample (cpu_sample), at one kernel launch in
// launch_stack_every while launches are counted, and at the return of a
// sync or copy that held the thread. They have a ring buffer of their own,
// so that a burst of them never costs a step's events their room.
#define NATIVE_DEPTH 64
#define PY_STACK_DEPTH 32

struct stack_event {
	__u8 kind;   // EV_STACK
	__u8 reason; // enum stack_reason
	__u16 api;   // the launch or call's cudaapi ID
	__u32 pid;
	__u32 tid;
	__s32 native_bytes; // bpf_get_stack's result: bytes of native, or an error
	__u32 npy;          // Python frames in py
	__u32 flags;        // enum stack_flag
	__u64 start_ns;
	__u64 end_ns;
	__u64 arg;    // a launch's kernel handle; a CPU sample's period in ns
	__u64 weight; // the launches a launch sample stands for
	__u64 native[NATIVE_DEPTH];
	__u64 py[PY_STACK_DEPTH]; // code objects, innermost first
};

const struct stack_event *unused_stack_event __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 23);
} stacks SEC(".maps");

// 0: no launch stacks; else one launch in this many has its stack read.
volatile const __u32 launch_stack_every = 0;
// Whether calls whose probe asks for it (COOKIE_STACK) have their stacks
// read, and from how long a call held its thread.
volatile const __u8 stack_calls = 0;
volatile const __u64 stack_call_min_ns = 0;

// emit_stack is a global function, verified once on its own: inlined
// into each probe, its loops (the thread list, the frames) multiplied the
// verifier's paths past its limit. what packs the reason (bits 0-7), the
// cudaapi ID (8-23) and the launches the sample stands for (32-63).
#define __arg_ctx __attribute__((btf_decl_tag("arg:ctx")))
#define STACK_WHAT(reason, api, weight) ((__u64)(reason) | ((__u64)(api) << 8) | ((__u64)(weight) << 32))
__noinline int emit_stack(void *ctx __arg_ctx, __u64 what, __u64 start, __u64 end, __u64 arg);

SEC("uprobe.multi")
int api_entry(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	struct thread_state *ts = thread_state(1);
	if (!ts)
		return 0;
	__u64 sp = PT_REGS_SP(ctx);
	struct call_slot *slot = &ts->drv;
	if (COOKIE_LAYER(cookie) == LAYER_RUNTIME) {
		slot = &ts->rt;
	} else if (COOKIE_LAYER(cookie) == LAYER_USER) {
		slot = &ts->user;
	} else if (rt_in_flight(ts, sp)) {
		// A driver call made underneath a runtime call: the runtime call
		// reports it, counting it again would double it.
		count_twin(cookie, ts->rt.cookie);
		return 0;
	}
	if (slot->start_ns && slot->sp > sp && (slot != &ts->rt || slot->gen == rt_gen_of(slot->cookie)))
		return 0; // nested call of the same layer; the outer one reports
	slot->sp = sp;
	slot->cookie = cookie;
	slot->gen = rt_gen_of(cookie);
	slot->args[0] = PT_REGS_PARM1(ctx);
	slot->args[1] = PT_REGS_PARM2(ctx);
	slot->args[2] = PT_REGS_PARM3(ctx);
	slot->args[3] = PT_REGS_PARM4(ctx);
	slot->args[4] = PT_REGS_PARM5(ctx);
	slot->start_ns = bpf_ktime_get_ns();
	return 0;
}

static __always_inline void emit_name(struct call_slot *slot, __u64 cookie, __u64 now)
{
	__u32 name_arg = COOKIE_NAME_ARG(cookie);
	__u32 out_arg = COOKIE_OUT_ARG(cookie);
	struct name_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		lost(EV_KERNEL_NAME);
		return;
	}
	__u64 id = bpf_get_current_pid_tgid();
	e->kind = EV_KERNEL_NAME;
	e->layer = COOKIE_LAYER(cookie);
	e->api = COOKIE_API(cookie);
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->pad = 0;
	e->ts_ns = now;
	e->handle = 0;
	e->arg = slot->args[1];
	e->name[0] = 0;
	if (out_arg < NARGS)
		bpf_probe_read_user(&e->handle, sizeof(e->handle), (void *)slot->args[out_arg]);
	if (name_arg > 0 && name_arg <= NARGS)
		bpf_probe_read_user_str(e->name, sizeof(e->name), (void *)slot->args[name_arg - 1]);
	bpf_ringbuf_submit(e, ringbuf_flags());
}

// Where a process's sample pool keeps its length (and a deque its
// append+pop counter), by process (probes/pool.go sets it once the pool is
// found): read at each CUDA call return and write, so a step's pool is its
// length as the step ended, with no polling.
struct pool_word {
	__u64 addr;    // an aligned word of the target's memory
	__u32 max;     // 0: the word is the length (ob_size); else a semaphore's maximum, length = max - value
	__u32 read_fd; // a multiprocessing queue's pipe read end + 1, 0: none
	__u64 state;   // a deque's state counter (appends + poplefts), 0: none
	__u64 gets;    // 4-byte reads of read_fd: items taken (count_pool_read)
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct pool_word);
} pools SEC(".maps");

// read_pool sets the event's pool length and state counter, each + 1 (0:
// not read), when the process has a pool.
static __always_inline void read_pool(struct event *e)
{
	e->pool = 0;
	e->pool_state = 0;
	e->pool_gets = 0;
	__u32 pid = e->pid;
	struct pool_word *pw = bpf_map_lookup_elem(&pools, &pid);
	if (!pw)
		return;
	__u64 v = 0;
	if (bpf_probe_read_user(&v, sizeof(v), (void *)pw->addr))
		return;
	if (pw->max) {
		__u32 value = (__u32)v;
		e->pool = value > pw->max ? 0 : pw->max - value + 1;
	} else {
		e->pool = v >= 0xffffffffULL ? 0 : (__u32)v + 1;
	}
	if (pw->state && e->pool && !bpf_probe_read_user(&v, sizeof(v), (void *)pw->state))
		e->pool_state = (__u32)v + 1;
	if (pw->read_fd && e->pool)
		e->pool_gets = (__u32)pw->gets + 1;
}

// reserve_call reserves a call event and fills in what every call event
// carries: who, when, the launches since the thread's previous event, and
// the pool. NULL (counted) when the ring buffer is full.
static __always_inline struct event *reserve_call(struct thread_state *ts, __u64 cookie, __u64 start, __u64 end)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		lost(EV_CALL);
		return NULL;
	}
	__u64 id = bpf_get_current_pid_tgid();
	e->kind = EV_CALL;
	e->layer = COOKIE_LAYER(cookie);
	e->api = COOKIE_API(cookie);
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->start_ns = start;
	e->end_ns = end;
	if (COOKIE_LAYER(cookie) == LAYER_USER) {
		// Launch counts stay for the thread's next CUDA call: a user
		// probe's event is a span of time, not a step of GPU work.
		e->launches = e->graph_launches = 0;
		e->launch_first_ns = e->launch_last_ns = 0;
	} else {
		e->launches = ts->launches;
		e->graph_launches = ts->graph_launches;
		e->launch_first_ns = ts->launch_first_ns;
		e->launch_last_ns = ts->launch_last_ns;
		ts->launches = 0;
		ts->graph_launches = 0;
		ts->launch_first_ns = 0;
		ts->launch_last_ns = 0;
	}
	e->out = 0;
	read_pool(e);
	return e;
}

SEC("uretprobe.multi")
int api_return(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	struct thread_state *ts = thread_state(0);
	if (!ts)
		return 0;
	struct call_slot *slot = &ts->drv;
	if (COOKIE_LAYER(cookie) == LAYER_RUNTIME)
		slot = &ts->rt;
	else if (COOKIE_LAYER(cookie) == LAYER_USER)
		slot = &ts->user;
	if (!slot->start_ns)
		return 0; // entry not seen (attached mid-call) or skipped
	__u64 sp = PT_REGS_SP(ctx);
	if (sp <= slot->sp)
		return 0; // a nested call returned; the outer one is still running
	if (sp > slot->sp + 16 || COOKIE_API(slot->cookie) != COOKIE_API(cookie)) {
		// The recorded call ended without its return being seen.
		slot->start_ns = 0;
		count(STAT_STALE_CALL);
		return 0;
	}
	__u64 now = bpf_ktime_get_ns();
	if (COOKIE_NAME_ARG(cookie)) {
		emit_name(slot, cookie, now);
		slot->start_ns = 0;
		return 0;
	}
	struct event *e = reserve_call(ts, cookie, slot->start_ns, now);
	if (!e) {
		slot->start_ns = 0;
		return 0;
	}
	e->args[0] = slot->args[0];
	e->args[1] = slot->args[1];
	e->args[2] = slot->args[2];
	e->args[3] = slot->args[3];
	e->args[4] = slot->args[4];
	e->ret = PT_REGS_RC(ctx);
	__u32 out_arg = COOKIE_OUT_ARG(cookie);
	if (out_arg < NARGS) {
		void *ptr = (void *)slot->args[out_arg];
		switch (COOKIE_OUT(cookie)) {
		case OUT_U32:
			bpf_probe_read_user(&e->out, 4, ptr);
			break;
		case OUT_U64:
			bpf_probe_read_user(&e->out, 8, ptr);
			break;
		}
	}
	__u64 start = slot->start_ns;
	slot->start_ns = 0;
	bpf_ringbuf_submit(e, ringbuf_flags());
	if (COOKIE_STACK(cookie) && stack_calls && now - start >= stack_call_min_ns)
		emit_stack(ctx, STACK_WHAT(STACK_CALL, COOKIE_API(cookie), 1), start, now, 0);
	return 0;
}

// Calls that only enqueue work and return at once (event records): one
// event at entry, start and end alike, and no return probe, which would
// cost each call another trap (~350 ns on the GPU host): DDP's
// backward pass records ~85 events a step. The runtime's record calls the
// driver's with the same event handle, and without a return the runtime
// call is not known to be in flight, so the runtime's notes its handle and
// the driver's, seeing it within instant_twin_ns, stays quiet.
volatile const __u64 instant_twin_ns = 1000000;

SEC("uprobe.multi")
int api_instant(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	struct thread_state *ts = thread_state(1);
	if (!ts)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 arg0 = PT_REGS_PARM1(ctx);
	if (COOKIE_LAYER(cookie) == LAYER_DRIVER) {
		if (rt_in_flight(ts, PT_REGS_SP(ctx))) {
			count_twin(cookie, ts->rt.cookie);
			return 0; // underneath a runtime call, which reports itself
		}
		if (ts->instant_ns && ts->instant_arg == arg0 && now - ts->instant_ns < instant_twin_ns) {
			ts->instant_ns = 0;
			count_twin(cookie, cookie);
			return 0; // the runtime's call of the same handle, just reported
		}
	} else if (COOKIE_LAYER(cookie) == LAYER_RUNTIME) {
		ts->instant_arg = arg0;
		ts->instant_ns = now;
	}
	struct event *e = reserve_call(ts, cookie, now, now);
	if (!e)
		return 0;
	e->args[0] = arg0;
	e->args[1] = PT_REGS_PARM2(ctx);
	e->args[2] = PT_REGS_PARM3(ctx);
	e->args[3] = PT_REGS_PARM4(ctx);
	e->args[4] = PT_REGS_PARM5(ctx);
	e->ret = 0;
	// The caller: the return address the call left on the stack, which
	// tells a library's own records from those the job reads
	// (probes/recordsites.go); only where asked: a runtime record's
	// function, not its call site (which runs before the call pushes it),
	// nor a device-to-device copy.
	if (COOKIE_CALLER(cookie))
		bpf_probe_read_user(&e->out, sizeof(e->out), (void *)PT_REGS_SP(ctx));
	bpf_ringbuf_submit(e, ringbuf_flags());
	return 0;
}

// emit_site sends the stack words of a kernel's first launch seen: once
// a kernel a run, so its cost (a 768-byte read) is nothing beside the
// launches'.
static __always_inline void emit_site(struct pt_regs *ctx, __u16 api, __u64 handle, __u64 now)
{
	struct site_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		lost(EV_KERNEL_SITE);
		return;
	}
	__u64 id = bpf_get_current_pid_tgid();
	e->kind = EV_KERNEL_SITE;
	e->pad0 = 0;
	e->api = api;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->ts_ns = now;
	e->handle = handle;
	void *sp = (void *)PT_REGS_SP(ctx);
	e->nwords = SITE_WORDS;
	if (bpf_probe_read_user(e->words, sizeof(e->words), sp)) {
		// Near the top of the thread's stack: a third of it.
		e->nwords = SITE_WORDS / 3;
		if (bpf_probe_read_user(e->words, SITE_WORDS / 3 * sizeof(__u64), sp))
			e->nwords = 0;
	}
	bpf_ringbuf_submit(e, ringbuf_flags());
}

// Kernel launches: entry only, no event. The count, first and last launch
// times travel on the thread's next event; per-kernel counts stay in a map.
SEC("uprobe.multi")
int launch_entry(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	struct thread_state *ts = thread_state(1);
	if (!ts)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	if (COOKIE_GRAPH(cookie))
		ts->graph_launches++;
	else
		ts->launches++;
	if (!ts->launch_first_ns)
		ts->launch_first_ns = now;
	ts->launch_last_ns = now;
	if (COOKIE_GRAPH(cookie)) {
		// A graph launch is also an event of its own, carrying its
		// count: which graph exec (args[0]) it replays tells the
		// correlator how many kernels it ran (correlate/graphs.go). A
		// graph replaces many launches, so this is rare.
		struct event *e = reserve_call(ts, cookie, now, now);
		if (e) {
			e->args[0] = PT_REGS_PARM1(ctx);
			e->args[1] = PT_REGS_PARM2(ctx);
			e->args[2] = e->args[3] = e->args[4] = 0;
			e->ret = 0;
			bpf_ringbuf_submit(e, ringbuf_flags());
		}
	}

	struct kernel_key key = {.pid = bpf_get_current_pid_tgid() >> 32};
	// Load both registers before choosing: the verifier rejects a load
	// through a context pointer the compiler has offset conditionally.
	__u64 arg0 = PT_REGS_PARM1(ctx), arg1 = PT_REGS_PARM2(ctx);
	asm volatile("" : "+r"(arg0), "+r"(arg1));
	key.func = COOKIE_FUNC_ARG(cookie) == 1 ? arg1 : arg0;
	if (launch_stack_every && ++ts->launch_stack_n >= launch_stack_every) {
		ts->launch_stack_n = 0;
		emit_stack(ctx, STACK_WHAT(STACK_LAUNCH, COOKIE_API(cookie), launch_stack_every), now, now, key.func);
	}
	__u64 *n = bpf_map_lookup_elem(&kernels, &key);
	if (n) {
		*n += 1; // this CPU's slot: no other writer while we run
		return 0;
	}
	__u64 one = 1;
	if (bpf_map_update_elem(&kernels, &key, &one, BPF_NOEXIST)) {
		n = bpf_map_lookup_elem(&kernels, &key);
		if (n)
			*n += 1;
		else
			count(STAT_KERNEL_MAP_FULL);
		return 0;
	}
	emit_site(ctx, COOKIE_API(cookie), key.func, now);
	return 0;
}


// emit_span sends an event that is only a kind, a thread and a time span.
static __always_inline void emit_span(__u8 kind, __u64 start, __u64 end, __u64 flags)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		lost(kind);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	__u64 id = bpf_get_current_pid_tgid();
	e->kind = kind;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->start_ns = start;
	e->end_ns = end;
	bpf_ringbuf_submit(e, flags);
}

// The loader's debugger hook: the set of libraries changed.
SEC("uprobe.multi")
int lib_load(struct pt_regs *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	// Wake the reader now: a library was just loaded and waits for probes.
	emit_span(EV_LIB_LOAD, now, now, BPF_RB_FORCE_WAKEUP);
	return 0;
}

// libc's blocking waits in a process running CPython: semaphore waits,
// where a Python lock acquire that may block ends up with the GIL released
// (queue.Queue.get, Event.wait, Condition.wait, multiprocessing locks),
// poll and select (multiprocessing queues and connections), and sleeps.
// The return probe times the wait and reads the waiting frames.
// count_pool_read counts a multiprocessing queue's items taken: each get
// reads the item's 4-byte length from the queue's pipe, then the pickle
// (multiprocessing.connection.Connection._recv_bytes), through _Py_read.
static __always_inline void count_pool_read(struct pt_regs *ctx)
{
	__u32 pid = bpf_get_current_pid_tgid() >> 32;
	struct pool_word *pw = bpf_map_lookup_elem(&pools, &pid);
	if (pw && pw->read_fd && PT_REGS_PARM1(ctx) == pw->read_fd - 1 && PT_REGS_PARM3(ctx) == 4)
		__sync_fetch_and_add(&pw->gets, 1);
}

SEC("uprobe.multi")
int py_lock_entry(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	if (count_waits)
		count_wait(cookie, 0);
	if (cookie == py_read_cookie)
		count_pool_read(ctx);
	struct thread_state *ts = thread_state(1);
	if (!ts)
		return 0;
	__u64 sp = PT_REGS_SP(ctx);
	// A wait inside a CUDA call (a sync sleeping or polling for the GPU) or
	// a function the user named (a store fetch) is that call's time, not a
	// Python wait.
	if (rt_in_flight(ts, sp) || (ts->drv.start_ns && ts->drv.sp > sp) ||
	    (ts->user.start_ns && ts->user.sp > sp))
		return 0;
	ts->py.sp = sp;
	ts->py.args[0] = PT_REGS_PARM1(ctx);
	ts->py.cookie = cookie;
	ts->py.start_ns = bpf_ktime_get_ns();
	return 0;
}

static __always_inline __u64 read_ptr(__u64 addr)
{
	__u64 v = 0;
	bpf_probe_read_user(&v, sizeof(v), (void *)addr);
	return v;
}

// py_tstate finds the calling thread's PyThreadState by walking the main
// interpreter's thread list: with the GIL released there is no "current"
// thread state to read. The one found is kept in the thread's state and
// checked with one read next time (a thread's PyThreadState lives as long
// as it runs Python; the main thread's is the last in the list).
static __always_inline __u64 py_tstate(struct py_layout *l, struct thread_state *ts)
{
	__u64 want = (__u32)bpf_get_current_pid_tgid();
	if (l->id_is_pthread)
		want = bpf_get_current_task_btf()->thread.fsbase;
	if (ts && ts->py_tstate && read_ptr(ts->py_tstate + l->tstate_id) == want)
		return ts->py_tstate;
	__u64 interp = read_ptr(l->runtime + l->interp_main);
	if (!interp)
		return 0;
	__u64 t = read_ptr(interp + l->threads_head);
	for (int i = 0; i < PY_MAX_THREADS && t; i++) {
		__u64 id = read_ptr(t + l->tstate_id);
		if (id == want) {
			if (ts)
				ts->py_tstate = t;
			return t;
		}
		t = read_ptr(t + l->tstate_next);
	}
	return 0;
}

// py_current_frame is the thread's innermost frame: tstate->frame (3.10),
// tstate->cframe->current_frame (3.11, 3.12), tstate->current_frame (3.13).
static __always_inline __u64 py_current_frame(struct py_layout *l, __u64 tstate)
{
	__u64 frame = read_ptr(tstate + l->tstate_frame);
	if (l->cframe_current >= 0 && frame)
		frame = read_ptr(frame + l->cframe_current);
	return frame;
}

// head_word is the 8-byte field at off in a frame's head, 0 past it.
static __always_inline __u64 head_word(const __u64 *head, __u32 off)
{
	__u32 i = off / 8;
	// Kept opaque: else clang may bound off (< 80) rather than i, and
	// the verifier then sees an 8-byte read that could pass the head.
	asm volatile("" : "+r"(i));
	if (i >= PY_FRAME_HEAD / 8)
		return 0;
	return head[i];
}

// py_frames records up to PY_FRAMES frames, innermost first, as their code
// objects and first locals, skipping the C-stack shim frames of 3.12 and
// later.
static __always_inline __u8 py_frames(struct py_layout *l, __u64 tstate, struct py_event *e)
{
	__u64 frame = py_current_frame(l, tstate);
	__u64 head[PY_FRAME_HEAD / 8];
	__u8 n = 0;
	for (int i = 0; i < 2 * PY_FRAMES && frame; i++) {
		if (bpf_probe_read_user(head, sizeof(head), (void *)frame))
			break;
		__u8 owner = 0;
		__u32 owner_at = l->frame_owner; // -1 (none) is past the head
		if (owner_at < PY_FRAME_HEAD)
			owner = ((__u8 *)head)[owner_at];
		__u64 code = head_word(head, l->frame_code);
		if (owner != 3 && code && n < PY_FRAMES) { // 3: FRAME_OWNED_BY_CSTACK
			e->frames[n].code = code;
			// 3.10's f_localsplus is past the head: read on its own.
			e->frames[n].self = l->frame_locals < PY_FRAME_HEAD ? head_word(head, l->frame_locals)
									     : read_ptr(frame + l->frame_locals);
			n++;
		}
		frame = head_word(head, l->frame_previous);
	}
	return n;
}

SEC("uretprobe.multi")
int py_lock_return(struct pt_regs *ctx)
{
	struct thread_state *ts = thread_state(0);
	if (!ts || !ts->py.start_ns)
		return 0;
	__u64 sp = PT_REGS_SP(ctx), start = ts->py.start_ns;
	if (sp <= ts->py.sp)
		return 0;
	ts->py.start_ns = 0;
	if (sp > ts->py.sp + 16)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	if (now - start < py_min_wait_ns && (!py_learning || now - start < py_learn_wait_ns))
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32;
	struct py_layout *l = bpf_map_lookup_elem(&python, &pid);
	if (!l || (now - start < py_min_wait_ns && !l->learning))
		return 0;
	struct py_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		lost(EV_PY_WAIT);
		return 0;
	}
	// Frames past nframes are left as they are: the reader ignores them (and
	// 1.5 KB is too much to clear here).
	e->kind = EV_PY_WAIT;
	e->nframes = 0;
	e->wait = ts->py.cookie;
	e->pid = pid;
	e->tid = (__u32)id;
	e->ret = PT_REGS_RC(ctx);
	e->start_ns = start;
	e->end_ns = now;
	e->arg0 = ts->py.args[0];
	__u64 cached = ts->py_tstate;
	__u64 tstate = py_tstate(l, ts);
	if (tstate)
		e->nframes = py_frames(l, tstate, e);
	if (!e->nframes && tstate && tstate == cached) {
		// The thread's PyThreadState, kept from before, may have been
		// replaced (a C thread taking the GIL anew): look it up again.
		// (One just looked up is not looked up twice.)
		ts->py_tstate = 0;
		tstate = py_tstate(l, ts);
		if (tstate)
			e->nframes = py_frames(l, tstate, e);
	}
	if (!e->nframes) {
		// A native thread's semaphore: not a Python wait.
		bpf_ringbuf_discard(e, 0);
		return 0;
	}
	ts->py_wait_end = bpf_ktime_get_ns();
	if (count_waits)
		count_wait(e->wait, 1);
	bpf_ringbuf_submit(e, ringbuf_flags());
	return 0;
}

// A thread that waited for a Python lock (or wrote) takes the GIL back
// next; when another thread holds it, it waits on the GIL's condition
// variable (pthread_cond_timedwait, in slices of the switch interval).
// Such waits that follow a reported wait or write within this are
// reported as its tail. bpf.Load sets it from events.GILFollowNS, the
// bound the correlator joins such a tail to its wait by: left 0, no GIL
// wait would be reported.
volatile const __u64 gil_follow_ns = 0;

SEC("uprobe.multi")
int gil_entry(struct pt_regs *ctx)
{
	struct thread_state *ts = thread_state(0);
	if (!ts)
		return 0;
	ts->in_cond = 1; // cleared as its system call returns (offcpu_return)
	if (!ts->py_wait_end)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	if (now - ts->py_wait_end > gil_follow_ns) {
		ts->py_wait_end = 0;
		return 0;
	}
	ts->gil.sp = PT_REGS_SP(ctx);
	ts->gil.start_ns = now;
	return 0;
}

SEC("uretprobe.multi")
int gil_return(struct pt_regs *ctx)
{
	struct thread_state *ts = thread_state(0);
	if (ts)
		ts->in_cond = 0;
	if (!ts || !ts->gil.start_ns)
		return 0;
	__u64 sp = PT_REGS_SP(ctx), start = ts->gil.start_ns;
	ts->gil.start_ns = 0;
	if (sp <= ts->gil.sp || sp > ts->gil.sp + 16)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	ts->py_wait_end = now; // a longer GIL wait comes as several
	emit_span(EV_PY_GIL, start, now, ringbuf_flags());
	return 0;
}

// A write(2) by a thread of a process running CPython, at its entry: a
// training loop logging the step it finished (a line to a file, a progress
// bar) is between steps, not in the next step's data loading; and the
// pool's length then is what such a log shows. Entry only, and no frame
// walk: one probe hit per write.
SEC("uprobe.multi")
int io_write(struct pt_regs *ctx)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		lost(EV_WRITE);
		return 0;
	}
	__builtin_memset(e, 0, sizeof(*e));
	__u64 id = bpf_get_current_pid_tgid(), now = bpf_ktime_get_ns();
	e->kind = EV_WRITE;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->start_ns = now;
	e->end_ns = now;
	e->args[0] = PT_REGS_PARM1(ctx);
	read_pool(e); // the pool as the loop logs the step
	bpf_ringbuf_submit(e, ringbuf_flags());
	// _Py_write lets the GIL go around write(2): taking it back when
	// another thread holds it is still the loop's logging, not the next
	// step (gil_entry follows it like a wait's tail).
	struct thread_state *ts = thread_state(0);
	if (ts)
		ts->py_wait_end = now;
	return 0;
}

// Python functions the user names (--probe ROLE=py:MODULE:QUALNAME): a
// Python-to-Python call runs no native function of its own (3.11+), so
// the interpreter's reads of the function's bytecode are watched instead,
// with hardware watchpoints (perf breakpoint events, one per thread and
// address): the instruction read once as each call starts (RESUME 0; on
// 3.10 the first instruction) and each return instruction. A call is the
// span from its start to a return in the same frame.
struct py_site_key {
	__u32 pid;
	__u32 pad;
	__u64 addr; // the watched address, as the breakpoint reports it
};

struct py_site {
	__u16 api;      // the user probe's id: the event's api
	__u8 is_return; // a return instruction, else the call's start
	__u8 resume;    // the start is RESUME 0, run only as a call starts (3.11+)
	__u32 pad;
};

struct py_call_key {
	__u32 tid;
	__u16 api;
	__u16 pad;
};

struct py_call {
	__u64 frame;    // the frame of the call being timed
	__u64 start_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct py_site_key);
	__type(value, struct py_site);
} py_sites SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct py_call_key);
	__type(value, struct py_call);
} py_calls SEC(".maps");

const struct py_site_key *unused_py_site_key __attribute__((unused));
const struct py_site *unused_py_site __attribute__((unused));

// PY_CALLER_DEPTH bounds the search for the timed call's frame among the
// callers of a new call: found, the new call is inside it (recursion).
#define PY_CALLER_DEPTH 32

static __always_inline int py_frame_calls(struct py_layout *l, __u64 frame, __u64 caller)
{
	for (int i = 0; i < PY_CALLER_DEPTH && frame; i++) {
		frame = read_ptr(frame + l->frame_previous);
		if (frame == caller)
			return 1;
	}
	return 0;
}

// emit_py_call reports a timed Python call that began as c says and
// ended now, and forgets c.
static __always_inline void emit_py_call(__u64 id, __u16 api, struct py_call *c, __u64 frame, __u64 now)
{
	__u64 start = c->start_ns;
	struct py_call_key ck = {.tid = (__u32)id, .api = api};
	bpf_map_delete_elem(&py_calls, &ck);
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		lost(EV_CALL);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->kind = EV_CALL;
	e->layer = LAYER_USER;
	e->api = api;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->start_ns = start;
	e->end_ns = now;
	e->args[0] = frame;
	read_pool(e);
	bpf_ringbuf_submit(e, ringbuf_flags());
}

SEC("perf_event")
int py_call_site(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), now = bpf_ktime_get_ns();
	struct py_site_key k = {.pid = id >> 32, .addr = ctx->addr};
	struct py_site *site = bpf_map_lookup_elem(&py_sites, &k);
	if (!site)
		return 0;
	struct py_layout *l = bpf_map_lookup_elem(&python, &k.pid);
	if (!l)
		return 0;
	__u64 tstate = py_tstate(l, thread_state(0));
	if (!tstate)
		return 0;
	__u64 frame = py_current_frame(l, tstate);
	if (!frame)
		return 0;
	struct py_call_key ck = {.tid = (__u32)id, .api = site->api};
	struct py_call *c = bpf_map_lookup_elem(&py_calls, &ck);
	if (!site->is_return) {
		if (c && c->frame == frame && !site->resume)
			return 0; // 3.10: a loop back to the first instruction
		if (c && c->frame != frame && py_frame_calls(l, frame, c->frame))
			return 0; // recursion: the outermost call is timed
		// A new call (one timed before that ended in an exception is
		// dropped; on 3.11+ the specialising interpreter rewriting RESUME
		// hits here again, in the same frame, a few ns on).
		struct py_call nc = {.frame = frame, .start_ns = now};
		bpf_map_update_elem(&py_calls, &ck, &nc, BPF_ANY);
		return 0;
	}
	if (!c || c->frame != frame)
		return 0;
	emit_py_call(id, site->api, c, frame, now);
	return 0;
}

// Whole calls by native anchors: a Python function that always calls one
// C function first and another last (multiprocessing's Queue.get takes
// its read lock, SemLock.__enter__ or .acquire, first and returns what
// _pickle.loads made of the bytes last) is timed by uprobes on the two:
// from the first's entry to the last's return, each made from a frame
// running that function's code (py_anchor_codes). No debug register, no
// cost at the thread's context switches, and a uprobe trap costs a
// fraction of a debug trap under the hypervisors here.
struct py_anchor_key {
	__u32 pid;
	__u32 pad;
	__u64 code; // the timed function's code object
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct py_anchor_key);
	__type(value, struct py_site);
} py_anchor_codes SEC(".maps");

const struct py_anchor_key *unused_py_anchor_key __attribute__((unused));

// PY_ANCHOR_DEPTH bounds the frames looked through for the timed
// function: multiprocessing's Lock.__enter__ is a Python method calling
// SemLock.__enter__, so the lock is taken one frame (and, from 3.12, one
// C-stack shim frame) below Queue.get's.
#define PY_ANCHOR_DEPTH 4

// py_anchor_frame finds, among the calling thread's innermost Python
// frames (no more than max of them, shims not counted), the first that
// runs a timed function, and returns its probe's id (0: none) and frame.
static __always_inline __u16 py_anchor_frame(__u64 id, int max, __u64 *frame)
{
	__u32 pid = id >> 32;
	struct py_layout *l = bpf_map_lookup_elem(&python, &pid);
	if (!l)
		return 0;
	__u64 tstate = py_tstate(l, thread_state(0));
	if (!tstate)
		return 0;
	__u64 f = py_current_frame(l, tstate);
	__u64 head[PY_FRAME_HEAD / 8];
	int seen = 0;
	for (int i = 0; i < PY_ANCHOR_DEPTH && f && seen < max; i++) {
		if (bpf_probe_read_user(head, sizeof(head), (void *)f))
			return 0;
		__u32 owner_at = l->frame_owner; // -1 (none) is past the head
		if (owner_at < PY_FRAME_HEAD && ((__u8 *)head)[owner_at] == 3) { // FRAME_OWNED_BY_CSTACK
			f = head_word(head, l->frame_previous);
			continue;
		}
		struct py_anchor_key k = {.pid = pid, .code = head_word(head, l->frame_code)};
		struct py_site *site = bpf_map_lookup_elem(&py_anchor_codes, &k);
		if (site) {
			*frame = f;
			return site->api;
		}
		seen++;
		f = head_word(head, l->frame_previous);
	}
	return 0;
}

SEC("uprobe.multi")
int py_anchor_start(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), now = bpf_ktime_get_ns(), frame = 0;
	__u16 api = py_anchor_frame(id, 2, &frame);
	if (!api)
		return 0;
	// A call that ended without reaching the last anchor (Queue.get
	// raising Empty) is dropped: the next start replaces it.
	struct py_call_key ck = {.tid = (__u32)id, .api = api};
	struct py_call nc = {.frame = frame, .start_ns = now};
	bpf_map_update_elem(&py_calls, &ck, &nc, BPF_ANY);
	return 0;
}

SEC("uretprobe.multi")
int py_anchor_end(struct pt_regs *ctx)
{
	// The last anchor counts only called from the timed function itself.
	__u64 id = bpf_get_current_pid_tgid(), now = bpf_ktime_get_ns(), frame = 0;
	__u16 api = py_anchor_frame(id, 1, &frame);
	if (!api)
		return 0;
	struct py_call_key ck = {.tid = (__u32)id, .api = api};
	struct py_call *c = bpf_map_lookup_elem(&py_calls, &ck);
	if (!c || c->frame != frame)
		return 0;
	emit_py_call(id, api, c, frame, now);
	return 0;
}

// py_stack records the code objects of the thread's innermost
// PY_STACK_DEPTH Python frames, innermost first, a C-stack shim frame of
// 3.12 and later as 0 (the reader skips it): one slot a frame, so that
// the verifier follows one path through the walk, not one for each
// count of frames kept so far.
static __always_inline __u32 py_stack(struct py_layout *l, __u64 tstate, __u64 *codes)
{
	__u64 frame = py_current_frame(l, tstate);
	__u64 head[PY_FRAME_HEAD / 8];
	__u32 n = 0;
	for (int i = 0; i < PY_STACK_DEPTH && frame; i++) {
		if (bpf_probe_read_user(head, sizeof(head), (void *)frame))
			break;
		__u8 owner = 0;
		__u32 owner_at = l->frame_owner; // -1 (none) is past the head
		if (owner_at < PY_FRAME_HEAD)
			owner = ((__u8 *)head)[owner_at];
		codes[i] = owner == 3 ? 0 : head_word(head, l->frame_code); // 3: FRAME_OWNED_BY_CSTACK
		n = i + 1;
		frame = head_word(head, l->frame_previous);
	}
	return n;
}

// in_probed_call says whether the thread is inside a call a probe timed:
// a CUDA call, a Python wait, the GIL taken back after one. A slot left
// set by a probe detached before its return only makes the reader hold
// the sample a while (profiles/offcpu.go).
static __always_inline int in_probed_call(struct thread_state *ts)
{
	if (!ts)
		return 0;
	return (ts->rt.start_ns && ts->rt.gen == rt_gen_of(ts->rt.cookie)) || ts->drv.start_ns || ts->user.start_ns ||
	       ts->py.start_ns || ts->gil.start_ns;
}

__noinline int emit_stack(void *ctx __arg_ctx, __u64 what, __u64 start, __u64 end, __u64 arg)
{
	struct stack_event *e = bpf_ringbuf_reserve(&stacks, sizeof(*e), 0);
	if (!e) {
		count(STAT_STACKS_FULL);
		return 0;
	}
	__u64 id = bpf_get_current_pid_tgid();
	e->kind = EV_STACK;
	e->reason = (__u8)what;
	e->api = (__u16)(what >> 8);
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->npy = 0;
	e->start_ns = start;
	e->end_ns = end;
	e->arg = arg;
	e->weight = what >> 32;
	struct thread_state *ts = thread_state(0);
	e->flags = in_probed_call(ts) ? STACK_FLAG_IN_CALL : 0;
	if ((__u8)what == STACK_OFFCPU) {
		// An off-CPU sample's weight is its flags: it stands for its
		// stretch (or the period, a shorter one), not for a count.
		e->flags |= e->weight & (STACK_FLAG_RUNNABLE | STACK_FLAG_COND_WAIT);
		e->weight = 1;
	}
	e->native_bytes = bpf_get_stack(ctx, e->native, sizeof(e->native), BPF_F_USER_STACK);
	__u32 pid = e->pid;
	struct py_layout *l = bpf_map_lookup_elem(&python, &pid);
	if (l) {
		__u64 tstate = py_tstate(l, ts);
		if (tstate)
			e->npy = py_stack(l, tstate, e->py);
	}
	// Frames past native_bytes and npy are left as they are: the reader
	// ignores them (and 768 bytes are too many to clear here). No wakeup
	// unless the buffer fills: the reader drains it every poll anyway,
	// and a wakeup at each sample would have gpuprof's reader preempt a
	// job thread ~100 times a second.
	bpf_ringbuf_submit(e, bpf_ringbuf_query(&stacks, BPF_RB_AVAIL_DATA) >= sizeof(struct stack_event) * 1024 ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
	return 0;
}

// The processes whose threads' CPU samples are reported (probes fills it
// as it attaches): the cpu-clock events are per CPU, for every task.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} profiled SEC(".maps");

// The period the cpu-clock events sample at, in ns of CPU time, which a
// CPU sample carries (probes sets it from its configuration).
volatile const __u64 cpu_period_ns = 0;

SEC("perf_event")
int cpu_sample(struct bpf_perf_event_data *ctx)
{
	__u32 pid = bpf_get_current_pid_tgid() >> 32;
	if (!bpf_map_lookup_elem(&profiled, &pid))
		return 0;
	__u64 now = bpf_ktime_get_ns();
	emit_stack(ctx, STACK_WHAT(STACK_CPU, 0, 1), now, now, cpu_period_ns);
	return 0;
}

// An empty perf event program: the benchmarks' baseline for the cost of a
// cpu-clock sample itself.
SEC("perf_event")
int bare_perf(struct bpf_perf_event_data *ctx)
{
	return 0;
}

// An empty program: the benchmarks' baseline for the cost of a bare uprobe.
SEC("uprobe.multi")
int bare(struct pt_regs *ctx)
{
	return 0;
}

// Off-CPU samples, for the wait profile's time outside the probed waits
// (the GIL taken back after a C call, locks and reads no probe times).
// A profiled thread leaving its CPU inside a system call is noted at
// sched_switch, in its own context; when that call returns (sys_exit,
// in its context again) its stacks are read, and they are those it left
// with: a thread off CPU runs no user code. Tracepoints only: kprobes and
// fentry are not in every kernel gpuprof runs on (CI's has neither), and
// no tracepoint fires in the incoming task's context at the switch
// itself. So a thread preempted while running user code is not seen.
// Stretches are sampled by their length, as the CPU samples are by time
// on CPU: one of d ns is read with chance d/offcpu_period_ns (every one
// from the period on) and stands for max(d, period), so that the time by
// stack adds up while a thread that blocks often for short is read at
// most about once a period.
volatile const __u64 offcpu_period_ns = 0;

// x86-64's saved user registers: orig_ax is the system call's number in
// one, negative in an interrupt or exception.
struct pt_regs___user {
	long orig_ax;
} __attribute__((preserve_access_index));

SEC("raw_tp/sched_switch")
int offcpu_leave(struct bpf_raw_tracepoint_args *ctx)
{
	// The current task is the one leaving (prev).
	__u32 pid = bpf_get_current_pid_tgid() >> 32;
	if (!offcpu_period_ns || !bpf_map_lookup_elem(&profiled, &pid))
		return 0;
	struct pt_regs___user *regs = (void *)bpf_task_pt_regs(bpf_get_current_task_btf());
	if (regs->orig_ax < 0)
		return 0;
	struct thread_state *ts = thread_state(1);
	if (!ts || ts->off_ns)
		return 0; // off CPU already in this call (woken, then preempted): from the first
	ts->off_ns = bpf_ktime_get_ns();
	ts->off_runnable = ctx->args[0] != 0; // sched_switch's preempt
	return 0;
}

SEC("raw_tp/sys_exit")
int offcpu_return(struct bpf_raw_tracepoint_args *ctx)
{
	struct thread_state *ts = bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0, 0);
	if (!ts || !ts->off_ns)
		return 0;
	__u64 now = bpf_ktime_get_ns(), start = ts->off_ns, d = now - start;
	__u64 flags = (ts->off_runnable ? STACK_FLAG_RUNNABLE : 0) | (ts->in_cond ? STACK_FLAG_COND_WAIT : 0);
	ts->off_ns = 0;
	// Cleared here, not only at gil_return: a return probe detached
	// before the wait returned would leave it set.
	ts->in_cond = 0;
	__u32 pid = bpf_get_current_pid_tgid() >> 32;
	if (!bpf_map_lookup_elem(&profiled, &pid))
		return 0;
	if (d < offcpu_period_ns && bpf_get_prandom_u32() % offcpu_period_ns >= d)
		return 0;
	emit_stack(ctx, STACK_WHAT(STACK_OFFCPU, 0, flags), start, now, offcpu_period_ns);
	return 0;
}
