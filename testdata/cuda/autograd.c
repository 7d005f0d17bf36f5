/*
 * autograd.c: libstandin_autograd.so, a stand-in for PyTorch's autograd
 * engine thread, for testdata/python/shapes.py --shape sync.
 *
 * loss.backward() in PyTorch hands the graph to a persistent native thread
 * (torch::autograd::Engine's device thread) and blocks the calling thread
 * in a C++ condition wait, the GIL released, until the backward pass is
 * done; that thread launches the backward kernels (more than the forward)
 * on the stream the forward used. standin_backward does the same: the work
 * (kernels launches of 0.1 ms each and one device-to-device copy of
 * d2d_bytes) goes to a persistent pthread, and the caller waits on a
 * pthread_cond until it has been queued.
 *
 * It does not link to the CUDA stand-ins: it finds the libcudart.so.13 the
 * process has already loaded (dlopen by soname, RTLD_NOLOAD), as torch's
 * libraries share the one runtime. Work goes to the default stream.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime_api.h"

#define BACKWARD_BLOCKS 100 /* 0.1 ms per kernel on the stand-in */

static struct {
	__typeof__(&cudaLaunchKernel) launch;
	__typeof__(&cudaMemcpyAsync) copy;
	__typeof__(&cudaMalloc) alloc;
	__typeof__(&cudaFree) release;
} rt;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cond = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int init_rc;

/* The job handed over: a sequence number asked for, and done. */
static unsigned long asked, finished;
static int job_kernels, job_rc;
static size_t job_bytes;
static void *dev_src, *dev_dst;
static size_t dev_bytes;

/* Kernel identities: the addresses of these (distinct) host stubs. */
static volatile int stub_sink;
static void autograd_mm_backward(void) { stub_sink = 1; }
static void autograd_gelu_backward(void) { stub_sink = 2; }

static int backward_pass(int kernels, size_t bytes)
{
	dim3 grid = {BACKWARD_BLOCKS, 1, 1}, block = {128, 1, 1};
	int k, rc;

	for (k = 0; k < kernels; k++) {
		const void *stub = k % 2 ? (const void *)autograd_gelu_backward
					 : (const void *)autograd_mm_backward;

		rc = rt.launch(stub, grid, block, NULL, 0, NULL);
		if (rc != 0)
			return rc;
	}
	if (bytes == 0)
		return 0;
	if (bytes > dev_bytes) {
		if (dev_src != NULL) {
			rt.release(dev_src);
			rt.release(dev_dst);
			dev_src = dev_dst = NULL;
		}
		dev_bytes = 0;
		if ((rc = rt.alloc(&dev_src, bytes)) != 0 || (rc = rt.alloc(&dev_dst, bytes)) != 0)
			return rc;
		dev_bytes = bytes;
	}
	/* The gradient buckets' copy (DDP's, or an accumulation's). */
	return rt.copy(dev_dst, dev_src, bytes, cudaMemcpyDeviceToDevice, NULL);
}

static void *engine_thread(void *arg)
{
	unsigned long seen = 0;

	(void)arg;
	pthread_mutex_lock(&lock);
	for (;;) {
		while (asked == seen)
			pthread_cond_wait(&work_cond, &lock);
		seen = asked;
		pthread_mutex_unlock(&lock);
		int rc = backward_pass(job_kernels, job_bytes);
		pthread_mutex_lock(&lock);
		job_rc = rc;
		finished = seen;
		pthread_cond_broadcast(&done_cond);
	}
	return NULL;
}

static void init(void)
{
	void *h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
	pthread_t th;

	if (h == NULL) {
		fprintf(stderr, "standin_autograd: libcudart.so.13 is not loaded: %s\n", dlerror());
		init_rc = -1;
		return;
	}
	rt.launch = (__typeof__(rt.launch))dlsym(h, "cudaLaunchKernel");
	rt.copy = (__typeof__(rt.copy))dlsym(h, "cudaMemcpyAsync");
	rt.alloc = (__typeof__(rt.alloc))dlsym(h, "cudaMalloc");
	rt.release = (__typeof__(rt.release))dlsym(h, "cudaFree");
	if (!rt.launch || !rt.copy || !rt.alloc || !rt.release) {
		init_rc = -2;
		return;
	}
	if (pthread_create(&th, NULL, engine_thread, NULL) != 0) {
		init_rc = -3;
		return;
	}
	pthread_detach(th);
}

/* loss.backward(): the engine thread queues kernels launches and a
 * d2d_bytes device-to-device copy; the caller waits until it has. 0 or a
 * CUDA error (negative: the helper could not start). */
int standin_backward(int kernels, size_t d2d_bytes)
{
	unsigned long me;
	int rc;

	pthread_once(&once, init);
	if (init_rc != 0)
		return init_rc;
	pthread_mutex_lock(&lock);
	job_kernels = kernels;
	job_bytes = d2d_bytes;
	me = ++asked;
	pthread_cond_signal(&work_cond);
	while (finished != me)
		pthread_cond_wait(&done_cond, &lock);
	rc = job_rc;
	pthread_mutex_unlock(&lock);
	return rc;
}
