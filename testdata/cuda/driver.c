/*
 * driver.c: stand-in for the CUDA driver, libcuda.so.1 (with driver_mem.c
 * and sim.c). Initialisation, launches, streams, events and
 * synchronisation.
 *
 * Symbol names and prototypes are the real ones (see driver_api.h) because
 * gpuprof attaches uprobes by name and reads arguments by position. Every
 * exported function calls only static or hidden helpers, never another
 * exported one, so a probe on one symbol fires once per call as with the
 * real driver.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "driver_api.h"
#include "sim.h"

/* Simulated kernel cost: every thread block takes 1 us. */
#define NS_PER_BLOCK 1000u

/* ---- Initialisation, devices, errors ---- */

CUresult cuInit(unsigned int flags)
{
	KEEP_FRAME();
	return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuDriverGetVersion(int *version)
{
	KEEP_FRAME();
	if (version == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*version = 13000; /* CUDA 13.0 */
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
	KEEP_FRAME();
	if (count == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*count = 1;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	KEEP_FRAME();
	if (device == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	if (ordinal != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*device = 0;
	return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult error, const char **str)
{
	/* The strings of the real driver for the codes the stand-in returns. */
	static const struct {
		CUresult code;
		const char *text;
	} texts[] = {
		{CUDA_SUCCESS, "no error"},
		{CUDA_ERROR_INVALID_VALUE, "invalid argument"},
		{CUDA_ERROR_OUT_OF_MEMORY, "out of memory"},
		{CUDA_ERROR_NOT_INITIALIZED, "initialization error"},
		{CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"},
		{CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"},
		{CUDA_ERROR_NOT_READY, "device not ready"},
	};
	size_t i;

	KEEP_FRAME();
	if (str == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		if (texts[i].code == error) {
			*str = texts[i].text;
			return CUDA_SUCCESS;
		}
	}
	*str = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

/* ---- Launches ---- */

/* Queues a kernel: grid blocks times NS_PER_BLOCK of work on stream s. A
 * zero-sized grid is accepted and queues nothing, so benchmarks can time the
 * launch path alone. The stand-in's kernels read no parameters. */
static CUresult launch(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
		       unsigned int bx, unsigned int by, unsigned int bz, CUstream s)
{
	uint64_t threads = (uint64_t)bx * by * bz;

	if (f == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	if (threads == 0 || threads > 1024) /* the real per-block limit */
		return CUDA_ERROR_INVALID_VALUE;
	return sim_enqueue_kernel(s, (uint64_t)gx * gy * gz * NS_PER_BLOCK);
}

static CUresult launch_ex(const CUlaunchConfig *c, CUfunction f)
{
	if (c == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	return launch(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY,
		      c->blockDimZ, c->hStream);
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
			unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
			CUstream s, void **params, void **extra)
{
	(void)shmem, (void)params, (void)extra;
	return launch(f, gx, gy, gz, bx, by, bz, s);
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
			     unsigned int bx, unsigned int by, unsigned int bz,
			     unsigned int shmem, CUstream s, void **params, void **extra)
{
	(void)shmem, (void)params, (void)extra;
	return launch(f, gx, gy, gz, bx, by, bz, s);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params,
			  void **extra)
{
	(void)params, (void)extra;
	return launch_ex(config, f);
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **params,
			       void **extra)
{
	(void)params, (void)extra;
	return launch_ex(config, f);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy,
				   unsigned int gz, unsigned int bx, unsigned int by,
				   unsigned int bz, unsigned int shmem, CUstream s,
				   void **params)
{
	(void)shmem, (void)params;
	return launch(f, gx, gy, gz, bx, by, bz, s);
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
					unsigned int gz, unsigned int bx, unsigned int by,
					unsigned int bz, unsigned int shmem, CUstream s,
					void **params)
{
	(void)shmem, (void)params;
	return launch(f, gx, gy, gz, bx, by, bz, s);
}

/* A graph launch runs a graph's kernels: an exec instantiated from a
 * captured graph (graph.c) for their time, or, for a test that makes up a
 * handle, its integer value as the run time in nanoseconds, e.g.
 * (CUgraphExec)(uintptr_t)2000000 for a 2 ms graph. */
static CUresult graph_launch(CUgraphExec g, CUstream s)
{
	uint64_t ns;

	if (g == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	if (sim_exec_ns(g, &ns) != CUDA_SUCCESS)
		ns = (uint64_t)(uintptr_t)g;
	return sim_enqueue(s, ns, NULL);
}

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	return graph_launch(hGraphExec, hStream);
}

CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
	return graph_launch(hGraphExec, hStream);
}

/* ---- Streams and synchronisation ---- */

CUresult cuStreamCreate(CUstream *phStream, unsigned int flags)
{
	(void)flags; /* blocking or not, all streams are alike here */
	return sim_stream_create(phStream);
}

CUresult cuStreamDestroy_v2(CUstream hStream)
{
	return sim_stream_destroy(hStream);
}

/* Waits, without the simulator lock, until s has run all its work. */
static CUresult stream_sync(CUstream s)
{
	uint64_t tail;
	CUresult r = sim_stream_tail(s, &tail);

	if (r == CUDA_SUCCESS)
		sim_sleep_until(tail);
	return r;
}

CUresult cuStreamSynchronize(CUstream hStream)
{
	return stream_sync(hStream);
}

CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
	return stream_sync(hStream);
}

CUresult cuCtxSynchronize(void)
{
	sim_sleep_until(sim_device_tail());
	return CUDA_SUCCESS;
}

/* The real _v2 takes the context to synchronise; there is only one here. */
CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
	(void)ctx;
	sim_sleep_until(sim_device_tail());
	return CUDA_SUCCESS;
}

/* ---- Events ---- */

CUresult cuEventCreate(CUevent *phEvent, unsigned int flags)
{
	CUevent e;

	(void)flags; /* timing is always on in the stand-in */
	if (phEvent == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	e = calloc(1, sizeof(*e));
	if (e == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*phEvent = e;
	return CUDA_SUCCESS;
}

CUresult cuEventDestroy_v2(CUevent hEvent)
{
	if (hEvent == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	free(hEvent);
	return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
	return sim_event_record(hEvent, hStream);
}

CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
	return sim_event_record(hEvent, hStream);
}

CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
	(void)flags; /* CU_EVENT_RECORD_EXTERNAL only matters in graphs */
	return sim_event_record(hEvent, hStream);
}

CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags)
{
	(void)flags;
	return sim_event_record(hEvent, hStream);
}

CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	return sim_event_elapsed(pMilliseconds, hStart, hEnd);
}

CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	return sim_event_elapsed(pMilliseconds, hStart, hEnd);
}

CUresult cuEventSynchronize(CUevent hEvent)
{
	return sim_event_wait(hEvent);
}

CUresult cuEventQuery(CUevent hEvent)
{
	return sim_event_query(hEvent);
}
