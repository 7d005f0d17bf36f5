/*
 * driver_mem.c: stand-in driver (libcuda.so.1) memory, copies and kernel
 * handles.
 *
 * "Device" memory is plain host memory, so copies really move the bytes
 * (at call time, which keeps the stand-in simple and programs that check
 * their data honest) and queue the simulated transfer time on a stream.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "driver_api.h"
#include "sim.h"

/* ---- Copies ---- */

/* Simulated transfer times: PCIe at 25 GB/s (25 bytes per ns) plus a fixed
 * 2 us per copy; on-device copies at 1 TB/s plus 1 us. */
static uint64_t pcie_ns(size_t n)
{
	return 2000u + n / 25u;
}

static uint64_t device_ns(size_t n)
{
	return 1000u + n / 1000u;
}

static void *ptr(CUdeviceptr d)
{
	return (void *)(uintptr_t)d;
}

/* Queues a copy of dur_ns on s and moves the bytes. *end_ns (if not NULL)
 * gets the time the simulated copy finishes. */
static CUresult copy(void *dst, const void *src, size_t n, uint64_t dur_ns, CUstream s,
		     uint64_t *end_ns)
{
	CUresult r;

	if (n > 0 && (dst == NULL || src == NULL))
		return CUDA_ERROR_INVALID_VALUE;
	r = sim_enqueue(s, dur_ns, end_ns); /* first: a bad stream copies nothing */
	if (r == CUDA_SUCCESS && n > 0)
		memmove(dst, src, n);
	return r;
}

/* A synchronous copy: on the default stream, and back once it is done. */
static CUresult copy_sync(void *dst, const void *src, size_t n, uint64_t dur_ns)
{
	uint64_t end;
	CUresult r = copy(dst, src, n, dur_ns, NULL, &end);

	if (r == CUDA_SUCCESS)
		sim_sleep_until(end);
	return r;
}

/* cuMemcpy and cuMemcpyAsync leave the direction to unified addressing; the
 * stand-in charges them like a host-to-device copy. */
CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
	return copy_sync(ptr(dst), ptr(src), ByteCount, pcie_ns(ByteCount));
}

CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
	return copy_sync(ptr(dst), ptr(src), ByteCount, pcie_ns(ByteCount));
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
	return copy(ptr(dst), ptr(src), ByteCount, pcie_ns(ByteCount), hStream, NULL);
}

CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
			    CUstream hStream)
{
	return copy(ptr(dst), ptr(src), ByteCount, pcie_ns(ByteCount), hStream, NULL);
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
	return copy_sync(ptr(dstDevice), srcHost, ByteCount, pcie_ns(ByteCount));
}

CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
	return copy_sync(dstHost, ptr(srcDevice), ByteCount, pcie_ns(ByteCount));
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
	return copy_sync(ptr(dstDevice), ptr(srcDevice), ByteCount, device_ns(ByteCount));
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
			      CUstream hStream)
{
	return copy(ptr(dstDevice), srcHost, ByteCount, pcie_ns(ByteCount), hStream, NULL);
}

CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost,
				   size_t ByteCount, CUstream hStream)
{
	return copy(ptr(dstDevice), srcHost, ByteCount, pcie_ns(ByteCount), hStream, NULL);
}

CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
			      CUstream hStream)
{
	return copy(dstHost, ptr(srcDevice), ByteCount, pcie_ns(ByteCount), hStream, NULL);
}

CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
				   CUstream hStream)
{
	return copy(dstHost, ptr(srcDevice), ByteCount, pcie_ns(ByteCount), hStream, NULL);
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
			      CUstream hStream)
{
	return copy(ptr(dstDevice), ptr(srcDevice), ByteCount, device_ns(ByteCount), hStream,
		    NULL);
}

CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
				   size_t ByteCount, CUstream hStream)
{
	return copy(ptr(dstDevice), ptr(srcDevice), ByteCount, device_ns(ByteCount), hStream,
		    NULL);
}

/* ---- Memory ---- */

/* Zeroed host memory stands in for every kind of GPU memory. */
static CUresult alloc(void **out, size_t n)
{
	void *p;

	if (out == NULL || n == 0)
		return CUDA_ERROR_INVALID_VALUE;
	p = calloc(1, n);
	if (p == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*out = p;
	return CUDA_SUCCESS;
}

/* The same for the 64-bit integer device pointers and allocation handles. */
static CUresult alloc_dev(unsigned long long *out, size_t n)
{
	void *p = NULL;
	CUresult r = out != NULL ? alloc(&p, n) : CUDA_ERROR_INVALID_VALUE;

	if (r == CUDA_SUCCESS)
		*out = (uintptr_t)p;
	return r;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	return alloc_dev(dptr, bytesize);
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	free(ptr(dptr));
	return CUDA_SUCCESS;
}

/* Stream-ordered allocation: the memory is usable at once, which is never
 * too early for work queued on the stream afterwards. */
CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	CUresult r = sim_stream_check(hStream);

	return r != CUDA_SUCCESS ? r : alloc_dev(dptr, bytesize);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	CUresult r = sim_stream_check(hStream);

	return r != CUDA_SUCCESS ? r : alloc_dev(dptr, bytesize);
}

/* Stream-ordered free: copies run at call time, so no queued work can
 * still need the memory, and it can go at once. */
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	CUresult r = sim_stream_check(hStream);

	if (r == CUDA_SUCCESS)
		free(ptr(dptr));
	return r;
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
	CUresult r = sim_stream_check(hStream);

	if (r == CUDA_SUCCESS)
		free(ptr(dptr));
	return r;
}

CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	return alloc(pp, bytesize);
}

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
	(void)Flags; /* portable, mapped, write-combined: all the same here */
	return alloc(pp, bytesize);
}

CUresult cuMemFreeHost(void *p)
{
	free(p);
	return CUDA_SUCCESS;
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	(void)flags;
	return alloc_dev(dptr, bytesize);
}

/* Physical allocations for virtual memory management: the handle is the
 * address of the memory. */
CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const void *prop,
		     unsigned long long flags)
{
	(void)flags;
	if (prop == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	return alloc_dev(handle, size);
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	if (handle == 0)
		return CUDA_ERROR_INVALID_VALUE;
	free(ptr(handle));
	return CUDA_SUCCESS;
}

/* ---- Kernel handles ---- */

/* A kernel is known by its name only. The same name always gives the same
 * handle (whether looked up as a function or a library kernel), as real
 * handles stay the same while their module is loaded, so gpuprof can map
 * handles seen at launch back to names seen at lookup. */
struct kernel {
	char *name;
};

#define MAX_KERNELS 256

static struct kernel kernels[MAX_KERNELS];
static size_t nkernels;
static pthread_mutex_t kernels_lock = PTHREAD_MUTEX_INITIALIZER;

static CUresult kernel_by_name(const char *name, struct kernel **out)
{
	CUresult r = CUDA_SUCCESS;
	size_t i;

	if (name == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&kernels_lock);
	for (i = 0; i < nkernels && strcmp(kernels[i].name, name) != 0; i++)
		;
	if (i == nkernels) {
		if (nkernels == MAX_KERNELS || (kernels[i].name = strdup(name)) == NULL)
			r = CUDA_ERROR_OUT_OF_MEMORY;
		else
			nkernels++;
	}
	if (r == CUDA_SUCCESS)
		*out = &kernels[i];
	pthread_mutex_unlock(&kernels_lock);
	return r;
}

CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	struct kernel *k;
	CUresult r;

	(void)hmod; /* one namespace for all modules */
	if (hfunc == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	r = kernel_by_name(name, &k);
	if (r == CUDA_SUCCESS)
		*hfunc = (CUfunction)k;
	return r;
}

CUresult cuLibraryGetKernel(CUkernel *kernel, CUlibrary library, const char *name)
{
	struct kernel *k;
	CUresult r;

	(void)library;
	if (kernel == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	r = kernel_by_name(name, &k);
	if (r == CUDA_SUCCESS)
		*kernel = (CUkernel)k;
	return r;
}

CUresult cuKernelGetFunction(CUfunction *func, CUkernel kernel)
{
	KEEP_FRAME();
	if (func == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	if (kernel == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	*func = (CUfunction)kernel;
	return CUDA_SUCCESS;
}
