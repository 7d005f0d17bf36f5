/*
 * sim.h: the simulated GPU timeline behind the driver stand-in.
 *
 * There is no GPU. A stream only remembers when its last queued piece of
 * work ends (its tail): work queued at time `now` starts at max(now, tail)
 * and pushes the tail on by its duration. That is enough to give events,
 * synchronisation and copies the timing a real GPU shows the host, which is
 * all gpuprof can observe. Times are CLOCK_MONOTONIC nanoseconds, the clock
 * eBPF's bpf_ktime_get_ns() reads.
 *
 * One mutex protects all of this state. Nobody sleeps while holding it:
 * waits read a target time under the lock and sleep after releasing it.
 */
#ifndef GPUPROF_TESTDATA_SIM_H
#define GPUPROF_TESTDATA_SIM_H

#include <stdint.h>

#include "cuda_types.h"

/* Internal to libcuda.so.1: hidden, so calls bind directly (no PLT). */
#pragma GCC visibility push(hidden)

struct CUstream_st {
	uint64_t tail_ns;         /* when the last queued work ends */
	struct CUgraph_st *graph; /* the graph being captured, NULL when not */
	struct CUstream_st *next; /* registry of created streams */
};

/* A graph made by stream capture: what its kernels cost. */
struct CUgraph_st {
	uint64_t kernels;
	uint64_t ns;
};

struct CUevent_st {
	uint64_t stamp_ns; /* when the work before the record was done */
	int recorded;
};

uint64_t sim_now(void);
void sim_sleep_until(uint64_t t_ns); /* never call with the lock held */

/* Queues dur_ns of work on s; *end_ns (if not NULL) gets its end time.
 * CUDA_ERROR_INVALID_HANDLE if s is not a live stream. */
CUresult sim_enqueue(CUstream s, uint64_t dur_ns, uint64_t *end_ns);
CUresult sim_stream_check(CUstream s);
/* Queues a kernel of dur_ns, or records it into the graph s captures. */
CUresult sim_enqueue_kernel(CUstream s, uint64_t dur_ns);
/* Starts capturing s into a new graph; ends it, handing the graph over. */
CUresult sim_capture_begin(CUstream s);
CUresult sim_capture_end(CUstream s, CUgraph *out);
/* The run time of an exec graph.c instantiated; CUDA_ERROR_INVALID_HANDLE
 * for any other handle. */
CUresult sim_exec_ns(CUgraphExec e, uint64_t *ns);
CUresult sim_stream_tail(CUstream s, uint64_t *tail_ns);
uint64_t sim_device_tail(void); /* latest tail over all streams ever used */
CUresult sim_stream_create(CUstream *out);
CUresult sim_stream_destroy(CUstream s);

CUresult sim_event_record(CUevent e, CUstream s);
CUresult sim_event_elapsed(float *ms, CUevent start, CUevent end);
CUresult sim_event_wait(CUevent e);
CUresult sim_event_query(CUevent e);

#pragma GCC visibility pop

/*
 * Every export must start with endbr64; push %rbp (see check_prologues.awk),
 * but GCC drops the frame of a leaf function that uses no stack, even with
 * -fno-omit-frame-pointer. Entry points that call nothing (real CUDA's never
 * are leaves) ask for their frame address, which makes the compiler keep
 * the frame; the empty asm only keeps that request from being optimised out.
 */
#define KEEP_FRAME() __asm__ volatile("" ::"r"(__builtin_frame_address(0)))

#endif
