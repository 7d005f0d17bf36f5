// The data pipeline's clones (shared/workloads/spec_pipeline.py --mode
// data: four samples a step, each cloned 31 times as a 4 MiB host tensor
// that frees the one before, the four held until the step's cat) under
// glibc malloc: page faults and time a step, 100 steps a round.
//
//   gcc -O2 -o /tmp/heapclones testdata/gpuhost/heapclones.c
//   /tmp/heapclones data-first; /tmp/heapclones object-first
//   MALLOC_MMAP_THRESHOLD_=67108864 MALLOC_TRIM_THRESHOLD_=1073741824 /tmp/heapclones object-first
//
// With malloc's dynamic thresholds the same loop runs in one of two
// modes, chosen by nothing more than whether a tensor's small object is
// allocated before its data or after: the freed tensors reused in place,
// or the heap's top trimmed at each step's end and faulted in afresh the
// next. Fixed thresholds (the third line) reuse in place whatever the
// order (docs/benchmark.md, 2026-12-07).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>

#define TENSOR (4u << 20)
#define SAMPLES 4
#define CLONES 31
#define STEPS 100

static long minor_faults(void) {
	struct rusage r;
	getrusage(RUSAGE_SELF, &r);
	return r.ru_minflt;
}

static double seconds(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

// A host tensor as torch allocates one: a small object and its data.
struct tensor {
	char *data;
	void *impl;
};

static int object_first;

static struct tensor tensor_new(void) {
	struct tensor t;
	if (object_first) {
		t.impl = malloc(200);
		t.data = malloc(TENSOR);
	} else {
		t.data = malloc(TENSOR);
		t.impl = malloc(200);
	}
	return t;
}

static void tensor_free(struct tensor t) {
	free(t.data);
	free(t.impl);
}

int main(int argc, char **argv) {
	if (argc != 2 || (strcmp(argv[1], "data-first") && strcmp(argv[1], "object-first"))) {
		fprintf(stderr, "usage: %s data-first|object-first\n", argv[0]);
		return 2;
	}
	object_first = !strcmp(argv[1], "object-first");
	struct tensor src = tensor_new();
	memset(src.data, 1, TENSOR);
	for (int round = 0; round < 5; round++) {
		long f0 = minor_faults();
		double t0 = seconds();
		for (int s = 0; s < STEPS; s++) {
			struct tensor held[SAMPLES];
			for (int k = 0; k < SAMPLES; k++) {
				struct tensor t = src;
				for (int i = 0; i < CLONES; i++) {
					struct tensor n = tensor_new();
					memcpy(n.data, t.data, TENSOR);
					if (i > 0)
						tensor_free(t);
					t = n;
				}
				held[k] = t;
			}
			for (int k = 0; k < SAMPLES; k++)
				tensor_free(held[k]);
		}
		printf("%s, round %d: %.0f faults a step, %.2f ms a step\n", argv[1], round,
		       (double)(minor_faults() - f0) / STEPS, (seconds() - t0) * 1e3 / STEPS);
	}
	return 0;
}
