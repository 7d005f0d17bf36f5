/*
 * runtime.c: stand-in for the CUDA runtime, libcudart.so.13 (with
 * runtime_mem.c). Driver loading, errors, devices, launches, events and
 * streams.
 *
 * Every entry point forwards to the driver entry point real CUDA 13 ends up
 * in, through a pointer from dlsym() (see runtime_internal.h), and never
 * calls another exported runtime function, so each probe fires once per
 * call. The version script gives every export the version node
 * libcudart.so.13, as in the library NVIDIA's wheels ship.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime_internal.h"

/* ---- Loading the driver ---- */

static struct rt_driver driver;
static int driver_ok;

/* GPUPROF_STANDIN_READ_DELAY_US: an elapsed-time read sleeps this long
 * before it reaches the driver, so that the runtime call is in flight with
 * its driver twin still to come for most of the time (gpuprof's
 * TestRaisedGenerationKeepsOtherGroupsInFlight). Read with the driver. */
static useconds_t read_delay_us;
static pthread_once_t driver_once = PTHREAD_ONCE_INIT;

static void load_driver(void)
{
	char path[PATH_MAX];
	const char *slash, *delay;
	Dl_info self;
	void *h;
	int n;

	/* The stand-in driver sits next to this library rather than on the
	 * loader's search path; find our own file from one of our functions
	 * (a static one, which nothing can interpose). */
	if (dladdr((void *)load_driver, &self) == 0 || self.dli_fname == NULL) {
		fprintf(stderr, "libcudart.so.13 (stand-in): cannot find its own file\n");
		return;
	}
	slash = strrchr(self.dli_fname, '/');
	if (slash != NULL)
		n = snprintf(path, sizeof(path), "%.*s/libcuda.so.1",
			     (int)(slash - self.dli_fname), self.dli_fname);
	else
		n = snprintf(path, sizeof(path), "libcuda.so.1");
	if (n < 0 || (size_t)n >= sizeof(path)) {
		fprintf(stderr, "libcudart.so.13 (stand-in): path too long\n");
		return;
	}
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		fprintf(stderr, "libcudart.so.13 (stand-in): %s\n", dlerror());
		return;
	}
#define RT_RESOLVE(name)                                                                    \
	driver.name = (__typeof__(driver.name))dlsym(h, #name);                             \
	if (driver.name == NULL) {                                                         \
		fprintf(stderr, "libcudart.so.13 (stand-in): %s lacks %s\n", path, #name); \
		return;                                                                    \
	}
	RT_DRIVER_FUNCS(RT_RESOLVE)
#undef RT_RESOLVE
	/* The real runtime initialises the driver before anything else. */
	if (driver.cuInit(0) != CUDA_SUCCESS) {
		fprintf(stderr, "libcudart.so.13 (stand-in): cuInit failed\n");
		return;
	}
	delay = getenv("GPUPROF_STANDIN_READ_DELAY_US");
	if (delay != NULL)
		read_delay_us = (useconds_t)strtoul(delay, NULL, 10);
	driver_ok = 1;
}

const struct rt_driver *rt_driver(void)
{
	pthread_once(&driver_once, load_driver);
	return driver_ok ? &driver : NULL;
}

/* ---- Errors and devices ---- */

/* Per thread, as in CUDA. Only written on failure, to keep the common path
 * free of TLS lookups. */
static __thread cudaError_t last_error;

cudaError_t rt_status(CUresult r)
{
	if (r != CUDA_SUCCESS)
		last_error = r;
	return r;
}

cudaError_t cudaGetLastError(void)
{
	cudaError_t r;

	rt_driver(); /* any first call loads the driver */
	r = last_error;
	last_error = cudaSuccess;
	return r;
}

const char *cudaGetErrorString(cudaError_t error)
{
	const struct rt_driver *drv = rt_driver();
	const char *text = NULL;

	if (drv != NULL && drv->cuGetErrorString(error, &text) == CUDA_SUCCESS && text != NULL)
		return text;
	return "unrecognized error code";
}

cudaError_t cudaSetDevice(int device)
{
	CUdevice dev;

	RT_DO(drv->cuDeviceGet(&dev, device)); /* there is one context: just check */
}

cudaError_t cudaGetDeviceCount(int *count)
{
	RT_DO(drv->cuDeviceGetCount(count));
}

/* ---- Launches ---- */

/* The real runtime maps a kernel's host stub to the CUfunction registered
 * for it; the stand-in passes the stub's address on as the handle. */
#define RT_FUNC(stub) ((CUfunction)(uintptr_t)(stub))

cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
			     size_t sharedMem, cudaStream_t stream)
{
	RT_DO(drv->cuLaunchKernel(RT_FUNC(func), gridDim.x, gridDim.y, gridDim.z, blockDim.x,
				  blockDim.y, blockDim.z, (unsigned int)sharedMem, stream, args,
				  NULL));
}

cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args,
				  size_t sharedMem, cudaStream_t stream)
{
	RT_DO(drv->cuLaunchKernel_ptsz(RT_FUNC(func), gridDim.x, gridDim.y, gridDim.z,
				       blockDim.x, blockDim.y, blockDim.z,
				       (unsigned int)sharedMem, stream, args, NULL));
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
	RT_DO(drv->cuGraphLaunch(graphExec, stream));
}

cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream)
{
	RT_DO(drv->cuGraphLaunch_ptsz(graphExec, stream));
}

/* Capture and instantiate reach the driver's, as the real runtime's do
 * (through cuGetProcAddress there). */
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, int mode)
{
	RT_DO(drv->cuStreamBeginCapture_v2(stream, mode));
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
	RT_DO(drv->cuStreamEndCapture(stream, pGraph));
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
				 unsigned long long flags)
{
	RT_DO(drv->cuGraphInstantiateWithFlags(pGraphExec, graph, flags));
}

/* ---- Events ---- */

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
	RT_DO(drv->cuEventCreate(event, 0));
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
	RT_DO(drv->cuEventCreate(event, flags));
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
	RT_DO(drv->cuEventDestroy_v2(event));
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
	RT_DO(drv->cuEventRecord(event, stream));
}

cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream)
{
	RT_DO(drv->cuEventRecord_ptsz(event, stream));
}

cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags)
{
	RT_DO(drv->cuEventRecordWithFlags(event, stream, flags));
}

cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t event, cudaStream_t stream,
					  unsigned int flags)
{
	RT_DO(drv->cuEventRecordWithFlags_ptsz(event, stream, flags));
}

/* CUDA 13's runtime reads elapsed times through the driver's _v2. One
 * body for both exports, not RT_DO in each: with the delay in each, the
 * compiler folded the second into a jump to the first, which the probes'
 * prologue check refuses. */
static cudaError_t read_elapsed(float *ms, cudaEvent_t start, cudaEvent_t end)
{
	const struct rt_driver *drv = rt_driver();

	if (drv == NULL)
		return rt_status(cudaErrorInitializationError);
	if (read_delay_us > 0)
		usleep(read_delay_us);
	return rt_status(drv->cuEventElapsedTime_v2(ms, start, end));
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
	return read_elapsed(ms, start, end);
}

cudaError_t cudaEventElapsedTime_v2(float *ms, cudaEvent_t start, cudaEvent_t end)
{
	return read_elapsed(ms, start, end);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
	RT_DO(drv->cuEventSynchronize(event));
}

cudaError_t cudaEventQuery(cudaEvent_t event)
{
	RT_DO(drv->cuEventQuery(event));
}

/* ---- Streams and synchronisation ---- */

cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
	RT_DO(drv->cuStreamCreate(pStream, 0));
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
	RT_DO(drv->cuStreamDestroy_v2(stream));
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
	RT_DO(drv->cuStreamSynchronize(stream));
}

cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
	RT_DO(drv->cuStreamSynchronize_ptsz(stream));
}

cudaError_t cudaDeviceSynchronize(void)
{
	RT_DO(drv->cuCtxSynchronize());
}
