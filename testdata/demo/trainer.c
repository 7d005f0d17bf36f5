/*
 * trainer.c: demo-trainer, a training job in the shape of a PyTorch loop,
 * running on the CUDA stand-ins and logging its own ground truth (one JSON
 * line per step) for gpuprof's end-to-end tests to compare against.
 *
 * Like PyTorch it does not link against CUDA: it dlopen()s libcudart.so.13,
 * then libcuda.so.1 for the direct driver calls cuBLAS makes, from --libdir.
 *
 * A step: CPU data loading (a sleep), two 4 MiB host-to-device copies,
 * --kernels launches adding up to --compute-ms of GPU time between two
 * events, a 4-byte device-to-host copy of the loss and a stream sync (like
 * loss.item()), then the time between the events. Meanwhile --engines
 * threads keep streams of their own busy, as NCCL or prefetch threads do.
 * --direct-records N adds N event records a step made straight to the
 * driver, as NCCL's own statically linked runtime makes around each
 * collective. --library-records N adds N records a step made through the
 * runtime from a call site of their own and never read, as DDP's and
 * NCCL's are; from step --read-library-from on, the loop also reads the
 * elapsed time between two of them (a job that begins timing something new).
 *
 * --micro-batches N (gradient accumulation): N data phases a step, each the
 * data sleep and the two copies, then its --kernels launches (--compute-ms
 * of GPU time) between a pair of events of its own; one loss copy and sync
 * a step, then the N readings. data_time is the N data phases, compute_time
 * the N readings, launches N * --kernels. --timing sync: no events, a
 * cudaDeviceSynchronize after each data phase's copies and one after its
 * kernels (the loss copy queued before the last); data_time includes the
 * first sync, compute_time is the time between the two. With neither (the
 * default: one micro-batch, events) a step is as above.
 *
 * --graph: as a torch.cuda.graphs or torch.compile reduce-overhead loop,
 * --graph-warmup steps (3) run eagerly; the next captures its kernels on
 * the step's stream into a CUDA graph (cudaStreamBeginCapture, the
 * launches, cudaStreamEndCapture, cudaGraphInstantiate), and it and every
 * step after replay the graph (cudaGraphLaunch: --compute-ms of GPU
 * time). A replaying step logs launches 0 (the graph launch is no kernel)
 * and graph_kernels, the kernels the graph ran (--kernels a replay).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "driver_api.h"
#include "testprog.h"
#include "runtime_api.h"

#define MIB (1024 * 1024)
#define INPUT_BYTES (4 * MIB)      /* each of the two inputs copied per step */
#define LOSS_BYTES 4               /* the float loss.item() reads */
#define ENGINE_COPY_BYTES (64 * 1024)
#define ENGINE_BLOCKS 200          /* 0.2 ms per engine kernel */
#define ENGINE_PAUSE_NS 5000000    /* 5 ms between engine rounds */
#define NS_PER_BLOCK 1000          /* the stand-in runs a block in 1 us */
#define THREADS_PER_BLOCK 256

/* ---- Time ---- */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u),
			      .tv_nsec = (long)(ns % 1000000000u)};

	if (ns == 0)
		return;
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void sleep_s(double s)
{
	sleep_ns((uint64_t)llround(s * 1e9));
}

/* ---- Options ---- */

struct options {
	int steps;
	const char *truth;
	const char *libdir;
	double start_delay, load_delay, thread_delay; /* seconds */
	int engines;
	double data_ms, compute_ms, step_pause_ms;
	int kernels;
	int events; /* --timing events (1) or none (0) */
	int sync_timing; /* --timing sync */
	int micro_batches;
	int direct_records;
	int library_records;
	int read_library_from; /* -1: never */
	int graph; /* --graph: a step's compute is one CUDA graph replayed */
	int graph_warmup; /* eager steps before the capture */
	const char *exec_after; /* --exec-after: a shell command this process becomes */
};

static const char usage[] =
	"usage: demo-trainer [--steps N] [--truth PATH] [--libdir DIR] [--start-delay S]\n"
	"                    [--load-delay S] [--thread-delay S] [--engines K] [--data-ms F]\n"
	"                    [--compute-ms F] [--kernels N] [--timing events|none|sync]\n"
	"                    [--micro-batches N] [--step-pause-ms F] [--direct-records N]\n"
	"                    [--library-records N] [--read-library-from STEP] [--graph]\n"
	"                    [--graph-warmup N] [--exec-after CMD]\n"
	"Order: sleep --load-delay, load the libraries, allocate and start the engine\n"
	"threads, sleep --thread-delay, start the training thread, which sleeps\n"
	"--start-delay and then runs the steps.\n";

static double parse_num(const char *opt, const char *s, double min, double max)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end != '\0' || errno != 0 || !isfinite(v) || v < min || v > max)
		fail(2, "bad value for --%s: '%s'", opt, s);
	return v;
}

static int parse_int(const char *opt, const char *s, int min, int max)
{
	double v = parse_num(opt, s, min, max);

	if (v != floor(v))
		fail(2, "bad value for --%s: '%s' (want an integer)", opt, s);
	return (int)v;
}

static void parse_options(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{"steps", required_argument, NULL, 's'},
		{"truth", required_argument, NULL, 'o'},
		{"libdir", required_argument, NULL, 'L'},
		{"start-delay", required_argument, NULL, 'S'},
		{"load-delay", required_argument, NULL, 'l'},
		{"thread-delay", required_argument, NULL, 'T'},
		{"engines", required_argument, NULL, 'e'},
		{"data-ms", required_argument, NULL, 'd'},
		{"compute-ms", required_argument, NULL, 'c'},
		{"kernels", required_argument, NULL, 'k'},
		{"timing", required_argument, NULL, 't'},
		{"step-pause-ms", required_argument, NULL, 'p'},
		{"direct-records", required_argument, NULL, 'r'},
		{"library-records", required_argument, NULL, 'R'},
		{"read-library-from", required_argument, NULL, 'F'},
		{"micro-batches", required_argument, NULL, 'M'},
		{"graph", no_argument, NULL, 'G'},
		{"graph-warmup", required_argument, NULL, 'W'},
		{"exec-after", required_argument, NULL, 'X'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c;

	*o = (struct options){.steps = 200, .truth = "demo-truth.jsonl", .engines = 2,
			      .data_ms = 3, .compute_ms = 6, .kernels = 40, .events = 1,
			      .read_library_from = -1, .micro_batches = 1, .graph_warmup = 3};
	opterr = 0; /* report errors ourselves, on one line */
	while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
		const char *name = longopts[0].name;
		int i;

		for (i = 0; longopts[i].name != NULL; i++)
			if (longopts[i].val == c)
				name = longopts[i].name;
		switch (c) {
		case 's': o->steps = parse_int(name, optarg, 0, INT_MAX); break;
		case 'o': o->truth = optarg; break;
		case 'L': o->libdir = optarg; break;
		case 'S': o->start_delay = parse_num(name, optarg, 0, 1e6); break;
		case 'l': o->load_delay = parse_num(name, optarg, 0, 1e6); break;
		case 'T': o->thread_delay = parse_num(name, optarg, 0, 1e6); break;
		case 'e': o->engines = parse_int(name, optarg, 0, 64); break;
		case 'd': o->data_ms = parse_num(name, optarg, 0, 1e6); break;
		case 'c': o->compute_ms = parse_num(name, optarg, 0, 1e6); break;
		case 'k': o->kernels = parse_int(name, optarg, 0, 1000000); break;
		case 'p': o->step_pause_ms = parse_num(name, optarg, 0, 1e6); break;
		case 'r': o->direct_records = parse_int(name, optarg, 0, 1000000); break;
		case 'R': o->library_records = parse_int(name, optarg, 0, 1000000); break;
		case 'F': o->read_library_from = parse_int(name, optarg, 0, INT_MAX); break;
		case 'M': o->micro_batches = parse_int(name, optarg, 1, 64); break;
		case 'G': o->graph = 1; break;
		case 'W': o->graph_warmup = parse_int(name, optarg, 0, INT_MAX); break;
		case 'X': o->exec_after = optarg; break;
		case 't':
			if (strcmp(optarg, "events") != 0 && strcmp(optarg, "none") != 0 &&
			    strcmp(optarg, "sync") != 0)
				fail(2, "bad value for --timing: '%s' (want events, none or sync)",
				     optarg);
			o->events = strcmp(optarg, "events") == 0;
			o->sync_timing = strcmp(optarg, "sync") == 0;
			break;
		case 'h': fputs(usage, stdout); exit(0);
		case ':': fail(2, "option %s needs a value", argv[optind - 1]);
		default: fail(2, "unknown option %s (see --help)", argv[optind - 1]);
		}
	}
	if (optind < argc)
		fail(2, "unexpected argument '%s' (see --help)", argv[optind]);
}

/* ---- Loading CUDA ---- */

/* The entry points used, typed from the stand-ins' prototypes. */
#define RUNTIME_FUNCS(X)                                                                    \
	X(cudaSetDevice) X(cudaStreamCreate) X(cudaStreamDestroy) X(cudaMalloc) X(cudaFree) \
	X(cudaMallocHost) X(cudaFreeHost) X(cudaLaunchKernel) X(cudaMemcpyAsync)            \
	X(cudaStreamSynchronize) X(cudaEventCreate) X(cudaEventDestroy)                     \
	X(cudaEventRecordWithFlags) X(cudaEventElapsedTime) X(cudaDeviceSynchronize)       \
	X(cudaEventRecord) X(cudaGraphLaunch) X(cudaStreamBeginCapture)                    \
	X(cudaStreamEndCapture) X(cudaGraphInstantiate)
#define DRIVER_FUNCS(X) \
	X(cuModuleGetFunction) X(cuLaunchKernelEx) X(cuEventCreate) X(cuEventRecord)

static struct {
#define FIELD(name) __typeof__(&name) name;
	RUNTIME_FUNCS(FIELD)
	DRIVER_FUNCS(FIELD)
#undef FIELD
} cu;

static void load_cuda(const char *libdir)
{
#ifdef STATIC_RUNTIME
	/* The runtime linked into this executable (libcudart_static.a's
	 * way): its functions are this program's own. */
	void *drv = open_lib(libdir, "libcuda.so.1");
#define RT(name) cu.name = name;
#else
	void *rt = open_lib(libdir, "libcudart.so.13");
	void *drv = open_lib(libdir, "libcuda.so.1");

#define RT(name) cu.name = (__typeof__(cu.name))symbol(rt, #name);
#endif
#define DRV(name) cu.name = (__typeof__(cu.name))symbol(drv, #name);
	RUNTIME_FUNCS(RT)
	DRIVER_FUNCS(DRV)
#undef RT
#undef DRV
}

/* The directory this executable is in: the default --libdir. */
static const char *exe_dir(void)
{
	static char dir[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
	char *slash;

	if (n <= 0)
		fail(1, "cannot read /proc/self/exe: %s", strerror(errno));
	dir[n] = '\0';
	slash = strrchr(dir, '/');
	if (slash != NULL)
		*slash = '\0';
	return dir;
}

/* ---- Kernels ---- */

/* The kernels' host functions: the runtime knows a kernel by the address of
 * its host function. These functions only lend their (distinct) addresses; the
 * different bodies keep the compiler from merging them into one. */
static volatile int stub_sink;
static void elementwise_kernel(void) { stub_sink = 1; }
static void layernorm_kernel(void) { stub_sink = 2; }
static void softmax_kernel(void) { stub_sink = 3; }
static void engine_kernel(void) { stub_sink = 4; }

/* nvcc's launch code: a kernel's host function calls its __device_stub__,
 * which launches the kernel through the runtime with the arguments in an
 * array of its own, so the call is no tail call (nvcc's is not). A tool
 * attached after the kernels were registered names a launch by the stub its
 * runtime call returns into (probes/kernelsite.go). */
#define DEVICE_STUB(kernel)                                                               \
	static __attribute__((noinline, optimize("no-optimize-sibling-calls"))) cudaError_t    \
	__device_stub__##kernel(dim3 grid, dim3 block, void *a, void *b, cudaStream_t stream) \
	{                                                                                    \
		void *args[] = {&a, &b};                                                     \
		return cu.cudaLaunchKernel((const void *)kernel, grid, block, args, 0, stream); \
	}
DEVICE_STUB(elementwise_kernel)
DEVICE_STUB(layernorm_kernel)
DEVICE_STUB(softmax_kernel)
DEVICE_STUB(engine_kernel)

typedef cudaError_t (*device_stub)(dim3, dim3, void *, void *, cudaStream_t);

static const device_stub step_stubs[] = {
	__device_stub__elementwise_kernel,
	__device_stub__layernorm_kernel,
	__device_stub__softmax_kernel,
};

/* ---- Engine threads ---- */

struct engine {
	pthread_t thread;
	cudaStream_t stream;
	void *dev, *host;
};

static atomic_int engines_stop;

/* A side stream's steady traffic: 3 x 0.2 ms of kernels, a 64 KiB read-back,
 * a sync, a 5 ms pause. */
static void *engine_main(void *arg)
{
	struct engine *e = arg;
	dim3 grid = {ENGINE_BLOCKS, 1, 1}, block = {THREADS_PER_BLOCK, 1, 1};
	int i;

	while (!atomic_load(&engines_stop)) {
		for (i = 0; i < 3; i++)
			CHECK(__device_stub__engine_kernel(grid, block, e->dev, NULL, e->stream));
		CHECK(cu.cudaMemcpyAsync(e->host, e->dev, ENGINE_COPY_BYTES,
					 cudaMemcpyDeviceToHost, e->stream));
		CHECK(cu.cudaStreamSynchronize(e->stream));
		sleep_ns(ENGINE_PAUSE_NS);
	}
	return NULL;
}

/* ---- Training ---- */

struct trainer {
	const struct options *o;
	FILE *truth;
	cudaStream_t stream;
	cudaEvent_t begin, end;
	CUevent collective; /* recorded straight to the driver (--direct-records) */
	cudaEvent_t library[2]; /* a library's own (--library-records) */
	cudaEvent_t *mb_begin, *mb_end; /* each micro-batch's (--micro-batches > 1) */
	void *dev_in[2], *host_in[2], *dev_loss, *host_loss;
	CUfunction gemm; /* looked up through the driver, as cuBLAS does */
	struct engine *engines;
	/* --graph: the step's kernels captured (after --graph-warmup steps) */
	cudaGraphExec_t graph;
	int step;
	/* This step's kernels run: launched eagerly, and by graph replays. */
	int launched, graph_kernels;
};

static void setup(struct trainer *t)
{
	int i;

	CHECK(cu.cudaSetDevice(0));
	CHECK(cu.cudaStreamCreate(&t->stream));
	for (i = 0; i < 2; i++) {
		CHECK(cu.cudaMalloc(&t->dev_in[i], INPUT_BYTES));
		CHECK(cu.cudaMallocHost(&t->host_in[i], INPUT_BYTES));
		memset(t->host_in[i], 0x40 + i, INPUT_BYTES);
	}
	CHECK(cu.cudaMalloc(&t->dev_loss, 256));
	CHECK(cu.cudaMallocHost(&t->host_loss, LOSS_BYTES));
	CHECK(cu.cuModuleGetFunction(&t->gemm, NULL, "demo_gemm_kernel"));
	CHECK(cu.cudaEventCreate(&t->begin));
	CHECK(cu.cudaEventCreate(&t->end));
	CHECK(cu.cuEventCreate(&t->collective, 0));
	CHECK(cu.cudaEventCreate(&t->library[0]));
	CHECK(cu.cudaEventCreate(&t->library[1]));
	if (t->o->micro_batches > 1) {
		t->mb_begin = calloc((size_t)t->o->micro_batches, sizeof(*t->mb_begin));
		t->mb_end = calloc((size_t)t->o->micro_batches, sizeof(*t->mb_end));
		if (t->mb_begin == NULL || t->mb_end == NULL)
			fail(1, "out of memory");
		for (i = 0; i < t->o->micro_batches; i++) {
			CHECK(cu.cudaEventCreate(&t->mb_begin[i]));
			CHECK(cu.cudaEventCreate(&t->mb_end[i]));
		}
	}

	t->engines = calloc((size_t)t->o->engines + 1, sizeof(*t->engines));
	if (t->engines == NULL)
		fail(1, "out of memory");
	for (i = 0; i < t->o->engines; i++) {
		struct engine *e = &t->engines[i];

		CHECK(cu.cudaStreamCreate(&e->stream));
		CHECK(cu.cudaMalloc(&e->dev, ENGINE_COPY_BYTES));
		CHECK(cu.cudaMallocHost(&e->host, ENGINE_COPY_BYTES));
		if (pthread_create(&e->thread, NULL, engine_main, e) != 0)
			fail(1, "cannot start engine thread");
	}
}

static void teardown(struct trainer *t)
{
	int i;

	atomic_store(&engines_stop, 1);
	for (i = 0; i < t->o->engines; i++)
		pthread_join(t->engines[i].thread, NULL);
	CHECK(cu.cudaDeviceSynchronize());
	for (i = 0; i < t->o->engines; i++) {
		CHECK(cu.cudaFree(t->engines[i].dev));
		CHECK(cu.cudaFreeHost(t->engines[i].host));
		CHECK(cu.cudaStreamDestroy(t->engines[i].stream));
	}
	free(t->engines);
	for (i = 0; i < 2; i++) {
		CHECK(cu.cudaFree(t->dev_in[i]));
		CHECK(cu.cudaFreeHost(t->host_in[i]));
	}
	CHECK(cu.cudaFree(t->dev_loss));
	CHECK(cu.cudaFreeHost(t->host_loss));
	CHECK(cu.cudaEventDestroy(t->begin));
	CHECK(cu.cudaEventDestroy(t->end));
	CHECK(cu.cudaStreamDestroy(t->stream));
}

/* Queues the step's kernels, compute-ms of GPU time in all, and returns the
 * GPU time queued in ns. 3 of 4 go through the runtime with a host stub,
 * every 4th through the driver with the gemm handle. */
static uint64_t launch_kernels(struct trainer *t)
{
	const struct options *o = t->o;
	uint64_t total_blocks = (uint64_t)llround(o->compute_ms * 1000.0 * 1000.0 / NS_PER_BLOCK);
	uint64_t queued_ns = 0;
	void *args[] = {&t->dev_in[0], &t->dev_in[1]};
	int k;

	for (k = 0; k < o->kernels; k++) {
		unsigned int blocks = (unsigned int)(total_blocks / (uint64_t)o->kernels +
						     ((uint64_t)k < total_blocks % (uint64_t)o->kernels));

		if (k % 4 == 3) {
			CUlaunchConfig cfg = {
				.gridDimX = blocks, .gridDimY = 1, .gridDimZ = 1,
				.blockDimX = THREADS_PER_BLOCK, .blockDimY = 1, .blockDimZ = 1,
				.hStream = t->stream,
			};

			CHECK(cu.cuLaunchKernelEx(&cfg, t->gemm, args, NULL));
		} else {
			dim3 grid = {blocks, 1, 1}, block = {THREADS_PER_BLOCK, 1, 1};

			CHECK(step_stubs[k % 4](grid, block, t->dev_in[0], t->dev_in[1], t->stream));
		}
		queued_ns += (uint64_t)blocks * NS_PER_BLOCK;
	}
	return queued_ns;
}

/* Queues the step's kernels: launched, or (--graph, past the warm-up) as
 * the graph that captured them once, replayed. Returns the GPU time
 * queued in ns. */
static uint64_t launch_compute(struct trainer *t)
{
	const struct options *o = t->o;
	uint64_t ns;

	if (!o->graph || t->step < o->graph_warmup) {
		t->launched += o->kernels;
		return launch_kernels(t);
	}
	if (t->graph == NULL) {
		/* Captured kernels do not run: the graph's first replay
		 * (below) runs them. */
		cudaGraph_t g;

		CHECK(cu.cudaStreamBeginCapture(t->stream, 0));
		launch_kernels(t);
		CHECK(cu.cudaStreamEndCapture(t->stream, &g));
		CHECK(cu.cudaGraphInstantiate(&t->graph, g, 0));
	}
	ns = (uint64_t)llround(o->compute_ms * 1000.0 * 1000.0 / NS_PER_BLOCK) * NS_PER_BLOCK;
	CHECK(cu.cudaGraphLaunch(t->graph, t->stream));
	t->graph_kernels += o->kernels;
	return ns;
}

/* The step's kernel counts for its truth line: launches, and with
 * --graph the kernels its graph replays ran. */
static void truth_kernels(struct trainer *t, char *buf, size_t n)
{
	if (t->o->graph)
		snprintf(buf, n, "\"launches\":%d,\"graph_kernels\":%d", t->launched, t->graph_kernels);
	else
		snprintf(buf, n, "\"launches\":%d", t->launched);
}

/* A library's own records, from a call site of their own (noinline). */
static __attribute__((noinline)) void library_records(struct trainer *t, int n)
{
	int i;

	for (i = 0; i < n; i++)
		CHECK(cu.cudaEventRecord(t->library[i % 2], t->stream));
}

static void train_step(struct trainer *t, int step)
{
	const struct options *o = t->o;
	uint64_t t_start, t_data, t_end, queued_ns;
	double compute_s;
	char kernels[64];
	int i;

	t->step = step;
	t->launched = t->graph_kernels = 0;
	t_start = now_ns();
	sleep_ns((uint64_t)llround(o->data_ms * 1e6)); /* the CPU loads a batch */
	for (i = 0; i < 2; i++)
		CHECK(cu.cudaMemcpyAsync(t->dev_in[i], t->host_in[i], INPUT_BYTES,
					 cudaMemcpyHostToDevice, t->stream));
	t_data = now_ns();

	if (o->events)
		CHECK(cu.cudaEventRecordWithFlags(t->begin, t->stream, 0));
	queued_ns = launch_compute(t);
	for (i = 0; i < o->direct_records; i++)
		CHECK(cu.cuEventRecord(t->collective, (CUstream)t->stream));
	library_records(t, o->library_records);
	if (o->events)
		CHECK(cu.cudaEventRecordWithFlags(t->end, t->stream, 0));
	CHECK(cu.cudaMemcpyAsync(t->host_loss, t->dev_loss, LOSS_BYTES, cudaMemcpyDeviceToHost,
				 t->stream));
	CHECK(cu.cudaStreamSynchronize(t->stream)); /* loss.item() */

	if (o->events) {
		float ms;

		CHECK(cu.cudaEventElapsedTime(&ms, t->begin, t->end));
		compute_s = ms / 1e3;
		if (o->read_library_from >= 0 && step >= o->read_library_from &&
		    o->library_records >= 2)
			CHECK(cu.cudaEventElapsedTime(&ms, t->library[0], t->library[1]));
	} else {
		compute_s = queued_ns / 1e9; /* what the GPU was given to do */
	}
	t_end = now_ns();
	truth_kernels(t, kernels, sizeof(kernels));

	fprintf(t->truth,
		"{\"step\":%d,\"t_start_ns\":%" PRIu64 ",\"t_data_end_ns\":%" PRIu64
		",\"t_end_ns\":%" PRIu64 ",\"step_time\":%.9f,\"data_time\":%.9f"
		",\"compute_time\":%.9f,%s}\n",
		step, t_start, t_data, t_end, (t_end - t_start) / 1e9, (t_data - t_start) / 1e9,
		compute_s, kernels);
	if (fflush(t->truth) != 0)
		fail(1, "cannot write %s: %s", o->truth, strerror(errno));

	sleep_ns((uint64_t)llround(o->step_pause_ms * 1e6));
}

/* A step of --micro-batches N or --timing sync (see the top). */
static void train_step_shaped(struct trainer *t, int step)
{
	const struct options *o = t->o;
	int n = o->micro_batches, m, i;
	uint64_t t_start, t_data = 0, t_end, data_ns = 0, sync_ns = 0, queued_ns = 0;
	double compute_s = 0;
	char kernels[64];

	t->step = step;
	t->launched = t->graph_kernels = 0;
	t_start = now_ns();
	for (m = 0; m < n; m++) {
		uint64_t d0 = now_ns(), c0;
		cudaEvent_t begin = n > 1 ? t->mb_begin[m] : t->begin;
		cudaEvent_t end = n > 1 ? t->mb_end[m] : t->end;

		sleep_ns((uint64_t)llround(o->data_ms * 1e6)); /* the CPU loads a micro-batch */
		for (i = 0; i < 2; i++)
			CHECK(cu.cudaMemcpyAsync(t->dev_in[i], t->host_in[i], INPUT_BYTES,
						 cudaMemcpyHostToDevice, t->stream));
		if (o->sync_timing)
			CHECK(cu.cudaDeviceSynchronize());
		t_data = c0 = now_ns();
		data_ns += t_data - d0;

		if (o->events)
			CHECK(cu.cudaEventRecordWithFlags(begin, t->stream, 0));
		queued_ns += launch_compute(t);
		if (m == n - 1) {
			for (i = 0; i < o->direct_records; i++)
				CHECK(cu.cuEventRecord(t->collective, (CUstream)t->stream));
			library_records(t, o->library_records);
		}
		if (o->events)
			CHECK(cu.cudaEventRecordWithFlags(end, t->stream, 0));
		if (o->sync_timing) {
			if (m == n - 1) /* loss.item()'s copy, before the step's last sync */
				CHECK(cu.cudaMemcpyAsync(t->host_loss, t->dev_loss, LOSS_BYTES,
							 cudaMemcpyDeviceToHost, t->stream));
			CHECK(cu.cudaDeviceSynchronize());
			sync_ns += now_ns() - c0;
		}
	}
	if (!o->sync_timing) {
		CHECK(cu.cudaMemcpyAsync(t->host_loss, t->dev_loss, LOSS_BYTES,
					 cudaMemcpyDeviceToHost, t->stream));
		CHECK(cu.cudaStreamSynchronize(t->stream)); /* loss.item() */
	}
	if (o->events) {
		for (m = 0; m < n; m++) {
			float ms;

			CHECK(cu.cudaEventElapsedTime(&ms, n > 1 ? t->mb_begin[m] : t->begin,
						      n > 1 ? t->mb_end[m] : t->end));
			compute_s += ms / 1e3;
		}
	} else if (o->sync_timing) {
		compute_s = sync_ns / 1e9;
	} else {
		compute_s = queued_ns / 1e9;
	}
	t_end = now_ns();
	truth_kernels(t, kernels, sizeof(kernels));

	fprintf(t->truth,
		"{\"step\":%d,\"t_start_ns\":%" PRIu64 ",\"t_data_end_ns\":%" PRIu64
		",\"t_end_ns\":%" PRIu64 ",\"step_time\":%.9f,\"data_time\":%.9f"
		",\"compute_time\":%.9f,%s}\n",
		step, t_start, t_data, t_end, (t_end - t_start) / 1e9, data_ns / 1e9, compute_s,
		kernels);
	if (fflush(t->truth) != 0)
		fail(1, "cannot write %s: %s", o->truth, strerror(errno));

	sleep_ns((uint64_t)llround(o->step_pause_ms * 1e6));
}

static void *train_main(void *arg)
{
	struct trainer *t = arg;
	int i;

	sleep_s(t->o->start_delay);
	for (i = 0; i < t->o->steps; i++) {
		if (t->o->micro_batches > 1 || t->o->sync_timing)
			train_step_shaped(t, i);
		else
			train_step(t, i);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct options o;
	struct trainer t = {.o = &o};
	pthread_t trainer;

	parse_options(argc, argv, &o);
	t.truth = fopen(o.truth, "w");
	if (t.truth == NULL)
		fail(1, "cannot open %s: %s", o.truth, strerror(errno));

	sleep_s(o.load_delay);
	load_cuda(o.libdir != NULL ? o.libdir : exe_dir());
	setup(&t);

	sleep_s(o.thread_delay);
	if (pthread_create(&trainer, NULL, train_main, &t) != 0)
		fail(1, "cannot start the training thread");
	pthread_join(trainer, NULL);

	teardown(&t);
	if (fclose(t.truth) != 0)
		fail(1, "cannot write %s: %s", o.truth, strerror(errno));
	printf("{\"steps\":%d}\n", o.steps);
	if (o.exec_after != NULL) {
		/* A new image in this process (a launcher's next stage). */
		fflush(stdout);
		execl("/bin/sh", "sh", "-c", o.exec_after, (char *)NULL);
		fail(1, "cannot exec /bin/sh: %s", strerror(errno));
	}
	return 0;
}
