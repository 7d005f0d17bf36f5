/*
 * runtime_internal.h: what the runtime stand-in's source files share: the
 * table of driver entry points it calls through.
 *
 * Like the real libcudart, the stand-in does not link against libcuda.so.1:
 * it dlopen()s the driver on first use and calls it through pointers from
 * dlsym(), so a uprobe on a driver symbol fires underneath the runtime call,
 * as it does under real CUDA.
 */
#ifndef GPUPROF_TESTDATA_RUNTIME_INTERNAL_H
#define GPUPROF_TESTDATA_RUNTIME_INTERNAL_H

#include <stdint.h>

#include "driver_api.h"
#include "runtime_api.h"

#pragma GCC visibility push(hidden)

/* The driver entry points the runtime uses. */
#define RT_DRIVER_FUNCS(X)                                                                  \
	X(cuInit)                                                                          \
	X(cuDeviceGet)                                                                     \
	X(cuDeviceGetCount)                                                                \
	X(cuGetErrorString)                                                                \
	X(cuLaunchKernel)                                                                  \
	X(cuLaunchKernel_ptsz)                                                             \
	X(cuGraphLaunch)                                                                   \
	X(cuGraphLaunch_ptsz)                                                              \
	X(cuStreamBeginCapture_v2)                                                         \
	X(cuStreamEndCapture)                                                              \
	X(cuGraphInstantiateWithFlags)                                                     \
	X(cuEventCreate)                                                                   \
	X(cuEventDestroy_v2)                                                               \
	X(cuEventRecord)                                                                   \
	X(cuEventRecord_ptsz)                                                              \
	X(cuEventRecordWithFlags)                                                          \
	X(cuEventRecordWithFlags_ptsz)                                                     \
	X(cuEventElapsedTime_v2)                                                           \
	X(cuEventSynchronize)                                                              \
	X(cuEventQuery)                                                                    \
	X(cuStreamCreate)                                                                  \
	X(cuStreamDestroy_v2)                                                              \
	X(cuStreamSynchronize)                                                             \
	X(cuStreamSynchronize_ptsz)                                                        \
	X(cuCtxSynchronize)                                                                \
	X(cuMemcpy)                                                                        \
	X(cuMemcpy_ptds)                                                                   \
	X(cuMemcpyAsync)                                                                   \
	X(cuMemcpyAsync_ptsz)                                                              \
	X(cuMemcpyHtoD_v2)                                                                 \
	X(cuMemcpyDtoH_v2)                                                                 \
	X(cuMemcpyDtoD_v2)                                                                 \
	X(cuMemcpyHtoDAsync_v2)                                                            \
	X(cuMemcpyHtoDAsync_v2_ptsz)                                                       \
	X(cuMemcpyDtoHAsync_v2)                                                            \
	X(cuMemcpyDtoHAsync_v2_ptsz)                                                       \
	X(cuMemcpyDtoDAsync_v2)                                                            \
	X(cuMemcpyDtoDAsync_v2_ptsz)                                                       \
	X(cuMemAlloc_v2)                                                                   \
	X(cuMemFree_v2)                                                                    \
	X(cuMemAllocAsync)                                                                 \
	X(cuMemAllocAsync_ptsz)                                                            \
	X(cuMemFreeAsync)                                                                  \
	X(cuMemFreeAsync_ptsz)                                                             \
	X(cuMemAllocHost_v2)                                                               \
	X(cuMemHostAlloc)                                                                  \
	X(cuMemFreeHost)                                                                   \
	X(cuMemAllocManaged)

struct rt_driver {
#define RT_FIELD(name) __typeof__(&name) name;
	RT_DRIVER_FUNCS(RT_FIELD)
#undef RT_FIELD
};

/* The loaded driver, loading it on the first call; NULL if it cannot be
 * loaded (the reason went to stderr once). */
const struct rt_driver *rt_driver(void);

/* Remembers a failure for cudaGetLastError and passes the code on. */
cudaError_t rt_status(CUresult r);

/* The body of a runtime entry point: loads the driver if need be, then
 * evaluates `call`, in which `drv` names the driver table, and returns its
 * result: RT_DO(drv->cuEventRecord(event, stream)). */
#define RT_DO(call)                                                                         \
	do {                                                                               \
		const struct rt_driver *drv = rt_driver();                                 \
		if (drv == NULL)                                                           \
			return rt_status(cudaErrorInitializationError);                   \
		return rt_status(call);                                                    \
	} while (0)

/* Device pointers are 64-bit integers in the driver API. */
#define RT_DPTR(p) ((CUdeviceptr)(uintptr_t)(p))

#pragma GCC visibility pop

#endif
