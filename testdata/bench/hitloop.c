/*
 * hitloop.c: calls one CUDA entry point of the stand-ins in a tight loop,
 * so gpuprof's benchmarks can measure what a probe adds to a call.
 *
 *   hitloop LIBDIR SYMBOL
 *
 * Loads LIBDIR/libcudart.so.13 and LIBDIR/libcuda.so.1, sets up what SYMBOL
 * needs, prints "ready", then for every line N read from stdin calls SYMBOL
 * N times and prints the mean ns per call ("%.2f"). Exits 0 at end of input.
 * The driver can attach probes after "ready" and compare lines before and
 * after. The calls queue no GPU time and never wait, so the loop measures
 * the call path alone.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver_api.h"
#include "testprog.h"
#include "runtime_api.h"

/* The entry points used, typed from the stand-ins' prototypes. */
#define RUNTIME_FUNCS(X)                                                                    \
	X(cudaLaunchKernel) X(cudaStreamCreate) X(cudaStreamSynchronize) X(cudaEventCreate) \
	X(cudaEventRecord) X(cudaEventSynchronize) X(cudaEventElapsedTime)                  \
	X(cudaMemcpyAsync) X(cudaMalloc) X(cudaFree) X(cudaMallocHost)
#define DRIVER_FUNCS(X)                                                                     \
	X(cuInit) X(cuModuleGetFunction) X(cuLaunchKernel) X(cuLaunchKernelEx)              \
	X(cuStreamCreate) X(cuStreamSynchronize) X(cuEventCreate) X(cuEventRecord)          \
	X(cuMemcpyDtoDAsync_v2)

static struct {
#define FIELD(name) __typeof__(&name) name;
	RUNTIME_FUNCS(FIELD)
	DRIVER_FUNCS(FIELD)
#undef FIELD
} cu;


/* What the loops work on, set up once. */
static CUfunction func;         /* a driver kernel handle */
static CUstream stream;         /* an idle created stream */
static CUevent ev_a, ev_b;      /* created events */
static void *dev_buf, *host_buf; /* copy source and destination */
static CUlaunchConfig config;   /* an empty grid on the default stream */
static const dim3 empty_grid = {0, 1, 1}, one_thread = {1, 1, 1};

#define COPY_BYTES 64
#define ALLOC_BYTES 4096

static volatile int stub_sink;
static void hitloop_kernel(void) { stub_sink = 1; } /* a runtime kernel's host stub */

/* One loop per symbol, calling straight through the dlsym'ed pointer so the
 * loop adds as little as possible around the call. Each returns the OR of
 * the results, which must stay 0. */
static int loop_cuLaunchKernel(long n)
{
	int bad = 0;

	while (n-- > 0)
		bad |= cu.cuLaunchKernel(func, 0, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
	return bad;
}

static int loop_cuLaunchKernelEx(long n)
{
	int bad = 0;

	while (n-- > 0)
		bad |= cu.cuLaunchKernelEx(&config, func, NULL, NULL);
	return bad;
}

static int loop_cudaLaunchKernel(long n)
{
	int bad = 0;

	while (n-- > 0)
		bad |= cu.cudaLaunchKernel((const void *)hitloop_kernel, empty_grid, one_thread,
					   NULL, 0, NULL);
	return bad;
}

static int loop_cuStreamSynchronize(long n)
{
	int bad = 0;

	while (n-- > 0)
		bad |= cu.cuStreamSynchronize(stream);
	return bad;
}

static int loop_cudaStreamSynchronize(long n)
{
	int bad = 0;

	while (n-- > 0)
		bad |= cu.cudaStreamSynchronize(stream);
	return bad;
}

static int loop_cudaEventRecord(long n)
{
	int bad = 0;

	while (n-- > 0)
		bad |= cu.cudaEventRecord(ev_a, NULL);
	return bad;
}

static int loop_cuEventRecord(long n)
{
	int bad = 0;

	while (n-- > 0)
		bad |= cu.cuEventRecord(ev_a, NULL);
	return bad;
}

static int loop_cudaEventElapsedTime(long n)
{
	int bad = 0;
	float ms;

	while (n-- > 0)
		bad |= cu.cudaEventElapsedTime(&ms, ev_a, ev_b);
	return bad;
}

/* Each copy queues 2 us of simulated transfer on `stream` that nobody waits
 * for: an asynchronous copy returns at once whatever the queue holds. */
/* A device-to-device copy straight to the driver (DDP's gradient buckets). */
static int loop_cuMemcpyDtoDAsync_v2(long n)
{
	int bad = 0;

	while (n-- > 0)
		bad |= cu.cuMemcpyDtoDAsync_v2((CUdeviceptr)dev_buf, (CUdeviceptr)dev_buf, COPY_BYTES,
					       stream);
	return bad;
}

static int loop_cudaMemcpyAsync(long n)
{
	int bad = 0;

	while (n-- > 0)
		bad |= cu.cudaMemcpyAsync(dev_buf, host_buf, COPY_BYTES, cudaMemcpyHostToDevice,
					  stream);
	return bad;
}

/* One iteration is an allocation and its free: two calls. */
static int loop_cudaMalloc(long n)
{
	int bad = 0;
	void *p;

	while (n-- > 0) {
		bad |= cu.cudaMalloc(&p, ALLOC_BYTES);
		bad |= cu.cudaFree(p);
	}
	return bad;
}

static void setup_events(void)
{
	CHECK(cu.cudaEventCreate(&ev_a));
	CHECK(cu.cudaEventCreate(&ev_b));
	/* Both recorded on the idle default stream and complete, so reading the
	 * time between them succeeds every time. */
	CHECK(cu.cudaEventRecord(ev_a, NULL));
	CHECK(cu.cudaEventRecord(ev_b, NULL));
	CHECK(cu.cudaEventSynchronize(ev_b));
}

static const struct bench {
	const char *symbol;
	int (*loop)(long n);
} benches[] = {
	{"cuLaunchKernel", loop_cuLaunchKernel},
	{"cuLaunchKernelEx", loop_cuLaunchKernelEx},
	{"cudaLaunchKernel", loop_cudaLaunchKernel},
	{"cuStreamSynchronize", loop_cuStreamSynchronize},
	{"cudaStreamSynchronize", loop_cudaStreamSynchronize},
	{"cudaEventRecord", loop_cudaEventRecord},
	{"cuEventRecord", loop_cuEventRecord},
	{"cudaEventElapsedTime", loop_cudaEventElapsedTime},
	{"cudaMemcpyAsync", loop_cudaMemcpyAsync},
	{"cuMemcpyDtoDAsync_v2", loop_cuMemcpyDtoDAsync_v2},
	{"cudaMalloc", loop_cudaMalloc},
};

/* Everything every loop might need; cheap enough to set up for all. */
static void setup(void)
{
	CHECK(cu.cuInit(0));
	CHECK(cu.cuModuleGetFunction(&func, NULL, "hitloop_kernel"));
	config = (CUlaunchConfig){.gridDimX = 0, .gridDimY = 1, .gridDimZ = 1,
				  .blockDimX = 1, .blockDimY = 1, .blockDimZ = 1};
	CHECK(cu.cudaStreamCreate(&stream));
	setup_events();
	CHECK(cu.cudaMalloc(&dev_buf, COPY_BYTES));
	CHECK(cu.cudaMallocHost(&host_buf, COPY_BYTES));
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	const struct bench *b = NULL;
	char line[64];
	void *rt, *drv;
	size_t i;

	if (argc != 3)
		fail(2, "usage: hitloop LIBDIR SYMBOL");
	for (i = 0; i < sizeof(benches) / sizeof(benches[0]); i++)
		if (strcmp(argv[2], benches[i].symbol) == 0)
			b = &benches[i];
	if (b == NULL)
		fail(2, "unsupported symbol %s", argv[2]);

	rt = open_lib(argv[1], "libcudart.so.13");
	drv = open_lib(argv[1], "libcuda.so.1");
#define RT(name) cu.name = (__typeof__(cu.name))symbol(rt, #name);
#define DRV(name) cu.name = (__typeof__(cu.name))symbol(drv, #name);
	RUNTIME_FUNCS(RT)
	DRIVER_FUNCS(DRV)
#undef RT
#undef DRV
	setup();
	if (b->loop(1) != 0) /* one checked call; it also warms the path up */
		fail(1, "%s failed", b->symbol);

	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin) != NULL) {
		char *end;
		long n;
		uint64_t t0, t1;
		int bad;

		line[strcspn(line, "\r\n")] = '\0';
		errno = 0;
		n = strtol(line, &end, 10);
		if (end == line || *end != '\0' || errno != 0 || n <= 0)
			fail(2, "bad count: '%s'", line);
		t0 = now_ns();
		bad = b->loop(n);
		t1 = now_ns();
		if (bad != 0)
			fail(1, "%s failed", b->symbol);
		printf("%.2f\n", (double)(t1 - t0) / (double)n);
		fflush(stdout);
	}
	return 0;
}
