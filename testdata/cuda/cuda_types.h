/*
 * cuda_types.h: the few CUDA types the stand-in libraries and the test
 * programs need.
 *
 * Typedef kinds, struct layouts and constant values follow CUDA 13's cuda.h,
 * driver_types.h and vector_types.h, because gpuprof reads arguments by
 * position under the x86-64 SysV ABI: an int where CUDA has an int and a
 * pointer where CUDA has a pointer keeps every argument in the register the
 * real library would see it in.
 */
#ifndef GPUPROF_TESTDATA_CUDA_TYPES_H
#define GPUPROF_TESTDATA_CUDA_TYPES_H

/* ---- Driver API (cuda.h) ---- */

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;

/* Opaque handles, with the struct tags CUDA uses. */
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUlib_st *CUlibrary;
typedef struct CUkern_st *CUkernel;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;

/* cuLaunchKernelEx's launch description; field order as in cuda.h. */
typedef struct CUlaunchConfig_st {
	unsigned int gridDimX, gridDimY, gridDimZ;
	unsigned int blockDimX, blockDimY, blockDimZ;
	unsigned int sharedMemBytes;
	CUstream hStream;
	void *attrs; /* CUlaunchAttribute * in cuda.h; unused here */
	unsigned int numAttrs;
} CUlaunchConfig;

/* The special stream handles; both name the default stream in the stand-in. */
#define CU_STREAM_LEGACY ((CUstream)0x1)
#define CU_STREAM_PER_THREAD ((CUstream)0x2)

/* The CUresult values the stand-ins return. */
#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_INVALID_DEVICE 101
#define CUDA_ERROR_INVALID_HANDLE 400
#define CUDA_ERROR_NOT_READY 600

/* ---- Runtime API (driver_types.h, vector_types.h) ---- */

/* An enum in CUDA; enums are int-sized, so int has the same ABI. Runtime
 * error codes used here have the same values as the driver's. */
typedef int cudaError_t;
#define cudaSuccess 0
#define cudaErrorInvalidValue 1
#define cudaErrorInitializationError 3

/* The runtime's handles are the driver's structs under other names. */
typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;

typedef struct dim3 {
	unsigned int x, y, z;
} dim3;

enum cudaMemcpyKind {
	cudaMemcpyHostToHost = 0,
	cudaMemcpyHostToDevice = 1,
	cudaMemcpyDeviceToHost = 2,
	cudaMemcpyDeviceToDevice = 3,
	cudaMemcpyDefault = 4,
};

#endif
