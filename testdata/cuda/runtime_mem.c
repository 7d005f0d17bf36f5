/*
 * runtime_mem.c: stand-in runtime (libcudart.so.13) copies and memory; see
 * runtime.c.
 */
#include <stdint.h>

#include "runtime_internal.h"

/* ---- Copies ---- */

/* A runtime copy goes to the driver copy for its direction; host-to-host
 * and "default" (unified addressing decides) go to the untyped cuMemcpy.
 * ptds/ptsz: the per-thread-default-stream entry point was called, so use
 * the driver's per-thread variant where it has one. */
static CUresult copy_sync(const struct rt_driver *d, void *dst, const void *src, size_t n,
			  enum cudaMemcpyKind kind, int ptds)
{
	switch (kind) {
	case cudaMemcpyHostToDevice:
		return d->cuMemcpyHtoD_v2(RT_DPTR(dst), src, n);
	case cudaMemcpyDeviceToHost:
		return d->cuMemcpyDtoH_v2(dst, RT_DPTR(src), n);
	case cudaMemcpyDeviceToDevice:
		return d->cuMemcpyDtoD_v2(RT_DPTR(dst), RT_DPTR(src), n);
	case cudaMemcpyHostToHost:
	case cudaMemcpyDefault:
		return (ptds ? d->cuMemcpy_ptds : d->cuMemcpy)(RT_DPTR(dst), RT_DPTR(src), n);
	}
	return CUDA_ERROR_INVALID_VALUE;
}

static CUresult copy_async(const struct rt_driver *d, void *dst, const void *src, size_t n,
			   enum cudaMemcpyKind kind, cudaStream_t s, int ptsz)
{
	switch (kind) {
	case cudaMemcpyHostToDevice:
		return (ptsz ? d->cuMemcpyHtoDAsync_v2_ptsz
			     : d->cuMemcpyHtoDAsync_v2)(RT_DPTR(dst), src, n, s);
	case cudaMemcpyDeviceToHost:
		return (ptsz ? d->cuMemcpyDtoHAsync_v2_ptsz
			     : d->cuMemcpyDtoHAsync_v2)(dst, RT_DPTR(src), n, s);
	case cudaMemcpyDeviceToDevice:
		return (ptsz ? d->cuMemcpyDtoDAsync_v2_ptsz
			     : d->cuMemcpyDtoDAsync_v2)(RT_DPTR(dst), RT_DPTR(src), n, s);
	case cudaMemcpyHostToHost:
	case cudaMemcpyDefault:
		return (ptsz ? d->cuMemcpyAsync_ptsz : d->cuMemcpyAsync)(RT_DPTR(dst),
									 RT_DPTR(src), n, s);
	}
	return CUDA_ERROR_INVALID_VALUE;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	RT_DO(copy_sync(drv, dst, src, count, kind, 0));
}

cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	RT_DO(copy_sync(drv, dst, src, count, kind, 1));
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
			    cudaStream_t stream)
{
	RT_DO(copy_async(drv, dst, src, count, kind, stream, 0));
}

cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count,
				 enum cudaMemcpyKind kind, cudaStream_t stream)
{
	RT_DO(copy_async(drv, dst, src, count, kind, stream, 1));
}

/* ---- Memory ---- */

/* The driver returns device memory as a 64-bit CUdeviceptr; the runtime
 * hands it on as a void *. `p` is read here, after the driver call that
 * fills it in has returned (an argument next to that call could be read
 * before it). */
static CUresult give_ptr(CUresult r, const CUdeviceptr *p, void **out)
{
	if (r == CUDA_SUCCESS)
		*out = (void *)(uintptr_t)*p;
	return r;
}

/* Where the caller passed no pointer, the driver is passed none either, so
 * it reports the error. */
#define RT_OUT(out, p) ((out) != NULL ? (p) : NULL)

cudaError_t cudaMalloc(void **devPtr, size_t size)
{
	CUdeviceptr p = 0;

	RT_DO(give_ptr(drv->cuMemAlloc_v2(RT_OUT(devPtr, &p), size), &p, devPtr));
}

cudaError_t cudaFree(void *devPtr)
{
	RT_DO(drv->cuMemFree_v2(RT_DPTR(devPtr)));
}

cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t stream)
{
	CUdeviceptr p = 0;

	RT_DO(give_ptr(drv->cuMemAllocAsync(RT_OUT(devPtr, &p), size, stream), &p, devPtr));
}

cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t stream)
{
	CUdeviceptr p = 0;

	RT_DO(give_ptr(drv->cuMemAllocAsync_ptsz(RT_OUT(devPtr, &p), size, stream), &p,
		       devPtr));
}

cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t stream)
{
	RT_DO(drv->cuMemFreeAsync(RT_DPTR(devPtr), stream));
}

cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t stream)
{
	RT_DO(drv->cuMemFreeAsync_ptsz(RT_DPTR(devPtr), stream));
}

cudaError_t cudaMallocHost(void **ptr, size_t size)
{
	RT_DO(drv->cuMemAllocHost_v2(ptr, size));
}

cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
	RT_DO(drv->cuMemHostAlloc(pHost, size, flags));
}

cudaError_t cudaFreeHost(void *ptr)
{
	RT_DO(drv->cuMemFreeHost(ptr));
}

cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
	CUdeviceptr p = 0;

	RT_DO(give_ptr(drv->cuMemAllocManaged(RT_OUT(devPtr, &p), size, flags), &p, devPtr));
}
