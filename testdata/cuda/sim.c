/*
 * sim.c: the simulated GPU timeline (see sim.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "sim.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD all land here: one device,
 * one context, and no need to tell the default streams apart. */
static struct CUstream_st default_stream;

/* Created streams, newest first. Streams are few, so a list will do. */
static struct CUstream_st *streams;

/* Latest tail of destroyed streams: as on a real GPU, destroying a stream
 * does not cancel its work, and a device-wide sync still waits for it. */
static uint64_t retired_tail;

uint64_t sim_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void sim_sleep_until(uint64_t t_ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(t_ns / 1000000000u),
		.tv_nsec = (long)(t_ns % 1000000000u),
	};

	/* Skip the system call when the GPU is already idle: idle syncs are the
	 * common case and their cost is what micro-benchmarks measure. */
	if (t_ns <= sim_now())
		return;
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/* Maps a handle to its stream, or NULL if it is not live. Lock held. */
static struct CUstream_st *resolve(CUstream s)
{
	struct CUstream_st *p;

	if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
		return &default_stream;
	for (p = streams; p != NULL; p = p->next)
		if (p == s)
			return p;
	return NULL;
}

CUresult sim_enqueue(CUstream s, uint64_t dur_ns, uint64_t *end_ns)
{
	struct CUstream_st *st;

	pthread_mutex_lock(&lock);
	st = resolve(s);
	if (st == NULL) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_INVALID_HANDLE;
	}
	st->tail_ns = max_u64(sim_now(), st->tail_ns) + dur_ns;
	if (end_ns != NULL)
		*end_ns = st->tail_ns;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

CUresult sim_enqueue_kernel(CUstream s, uint64_t dur_ns)
{
	struct CUstream_st *st;

	pthread_mutex_lock(&lock);
	st = resolve(s);
	if (st == NULL) {
		pthread_mutex_unlock(&lock);
		return CUDA_ERROR_INVALID_HANDLE;
	}
	if (st->graph != NULL) { /* captured: runs when the graph does */
		st->graph->kernels++;
		st->graph->ns += dur_ns;
	} else {
		st->tail_ns = max_u64(sim_now(), st->tail_ns) + dur_ns;
	}
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

CUresult sim_capture_begin(CUstream s)
{
	struct CUgraph_st *g = calloc(1, sizeof(*g));
	struct CUstream_st *st;
	CUresult r = CUDA_SUCCESS;

	if (g == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&lock);
	st = resolve(s);
	if (st == NULL)
		r = CUDA_ERROR_INVALID_HANDLE;
	else if (st->graph != NULL)
		r = CUDA_ERROR_INVALID_VALUE; /* already capturing */
	else
		st->graph = g, g = NULL;
	pthread_mutex_unlock(&lock);
	free(g);
	return r;
}

CUresult sim_capture_end(CUstream s, CUgraph *out)
{
	struct CUstream_st *st;
	CUresult r = CUDA_SUCCESS;

	if (out == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	st = resolve(s);
	if (st == NULL || st->graph == NULL) {
		r = st == NULL ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
	} else {
		*out = st->graph;
		st->graph = NULL;
	}
	pthread_mutex_unlock(&lock);
	return r;
}

CUresult sim_stream_check(CUstream s)
{
	return sim_stream_tail(s, NULL);
}

CUresult sim_stream_tail(CUstream s, uint64_t *tail_ns)
{
	struct CUstream_st *st;

	pthread_mutex_lock(&lock);
	st = resolve(s);
	if (st != NULL && tail_ns != NULL)
		*tail_ns = st->tail_ns;
	pthread_mutex_unlock(&lock);
	return st != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

uint64_t sim_device_tail(void)
{
	struct CUstream_st *p;
	uint64_t t;

	pthread_mutex_lock(&lock);
	t = max_u64(default_stream.tail_ns, retired_tail);
	for (p = streams; p != NULL; p = p->next)
		t = max_u64(t, p->tail_ns);
	pthread_mutex_unlock(&lock);
	return t;
}

CUresult sim_stream_create(CUstream *out)
{
	struct CUstream_st *st;

	if (out == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	st = calloc(1, sizeof(*st));
	if (st == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&lock);
	st->next = streams;
	streams = st;
	pthread_mutex_unlock(&lock);
	*out = st;
	return CUDA_SUCCESS;
}

CUresult sim_stream_destroy(CUstream s)
{
	struct CUstream_st **pp;

	pthread_mutex_lock(&lock);
	for (pp = &streams; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			retired_tail = max_u64(retired_tail, s->tail_ns);
			pthread_mutex_unlock(&lock);
			free(s);
			return CUDA_SUCCESS;
		}
	}
	pthread_mutex_unlock(&lock);
	/* The default streams cannot be destroyed either. */
	return CUDA_ERROR_INVALID_HANDLE;
}

CUresult sim_event_record(CUevent e, CUstream s)
{
	struct CUstream_st *st;

	if (e == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&lock);
	st = resolve(s);
	if (st != NULL) {
		/* The event completes once all work queued before it is done. */
		e->stamp_ns = max_u64(sim_now(), st->tail_ns);
		e->recorded = 1;
	}
	pthread_mutex_unlock(&lock);
	return st != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult sim_event_elapsed(float *ms, CUevent start, CUevent end)
{
	CUresult r = CUDA_SUCCESS;
	uint64_t now;

	if (ms == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	if (start == NULL || end == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&lock);
	now = sim_now();
	if (!start->recorded || !end->recorded)
		r = CUDA_ERROR_INVALID_HANDLE;
	else if (start->stamp_ns > now || end->stamp_ns > now)
		r = CUDA_ERROR_NOT_READY; /* the GPU has not reached an event yet */
	else
		*ms = (float)((int64_t)(end->stamp_ns - start->stamp_ns) / 1e6);
	pthread_mutex_unlock(&lock);
	return r;
}

CUresult sim_event_wait(CUevent e)
{
	uint64_t t = 0;

	if (e == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&lock);
	if (e->recorded) /* like CUDA, a never-recorded event is complete */
		t = e->stamp_ns;
	pthread_mutex_unlock(&lock);
	sim_sleep_until(t);
	return CUDA_SUCCESS;
}

CUresult sim_event_query(CUevent e)
{
	CUresult r;

	if (e == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&lock);
	r = e->recorded && e->stamp_ns > sim_now() ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
	pthread_mutex_unlock(&lock);
	return r;
}
