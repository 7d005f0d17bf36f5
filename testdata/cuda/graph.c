/*
 * graph.c: CUDA graphs by stream capture in the driver stand-in. While a
 * stream captures, kernels launched on it are recorded into its graph
 * (sim.c: their count and time) rather than run; instantiating the graph
 * makes an exec, and launching the exec (driver.c) runs the kernels'
 * time. Copies and event records on a capturing stream still run: the
 * stand-in's loops capture kernels only.
 *
 * Execs are kept in a list, so that a real exec is told from a made-up
 * handle whose integer value is a run time (older tests).
 */
#include <pthread.h>
#include <stdlib.h>

#include "driver_api.h"
#include "sim.h"

struct CUgraphExec_st {
	uint64_t ns;
	struct CUgraphExec_st *next;
};

static pthread_mutex_t execs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct CUgraphExec_st *execs;

CUresult sim_exec_ns(CUgraphExec e, uint64_t *ns)
{
	struct CUgraphExec_st *p;
	CUresult r = CUDA_ERROR_INVALID_HANDLE;

	pthread_mutex_lock(&execs_lock);
	for (p = execs; p != NULL; p = p->next) {
		if (p == e) {
			*ns = p->ns;
			r = CUDA_SUCCESS;
			break;
		}
	}
	pthread_mutex_unlock(&execs_lock);
	return r;
}

static CUresult instantiate(CUgraphExec *out, CUgraph g)
{
	struct CUgraphExec_st *e;

	if (out == NULL || g == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	e = calloc(1, sizeof(*e));
	if (e == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	e->ns = g->ns > 0 ? g->ns : 1;
	pthread_mutex_lock(&execs_lock);
	e->next = execs;
	execs = e;
	pthread_mutex_unlock(&execs_lock);
	*out = e;
	return CUDA_SUCCESS;
}

CUresult cuStreamBeginCapture(CUstream hStream, int mode)
{
	(void)mode;
	return sim_capture_begin(hStream);
}

CUresult cuStreamBeginCapture_ptsz(CUstream hStream, int mode)
{
	(void)mode;
	return sim_capture_begin(hStream);
}

CUresult cuStreamBeginCapture_v2(CUstream hStream, int mode)
{
	(void)mode;
	return sim_capture_begin(hStream);
}

CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, int mode)
{
	(void)mode;
	return sim_capture_begin(hStream);
}

CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
	return sim_capture_end(hStream, phGraph);
}

CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
	return sim_capture_end(hStream, phGraph);
}

CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, void *phErrorNode,
			    char *logBuffer, size_t bufferSize)
{
	(void)phErrorNode, (void)logBuffer, (void)bufferSize;
	return instantiate(phGraphExec, hGraph);
}

CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, void *phErrorNode,
			       char *logBuffer, size_t bufferSize)
{
	(void)phErrorNode, (void)logBuffer, (void)bufferSize;
	return instantiate(phGraphExec, hGraph);
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
				     unsigned long long flags)
{
	(void)flags;
	return instantiate(phGraphExec, hGraph);
}

CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
				      void *instantiateParams)
{
	(void)instantiateParams;
	return instantiate(phGraphExec, hGraph);
}

CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
					   void *instantiateParams)
{
	(void)instantiateParams;
	return instantiate(phGraphExec, hGraph);
}
