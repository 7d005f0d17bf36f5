// A CPU-speed witness for overhead.py: a fixed piece of integer work done
// over and over on one CPU, the monotonic time of the end of each piece
// written a line each (ns), until killed. Its rate moves with the speed
// the host gives that CPU (the H200 host is a VM: its CPUs' speed is the
// hypervisor's to give) and with nothing gpuprof does, which runs on CPUs
// of its own: a covariate for the job's step rate that gpuprof cannot move.
//   gcc -O2 -o /tmp/witness testdata/gpuhost/witness.c && taskset -c 16 /tmp/witness FILE
#include <stdint.h>
#include <stdio.h>
#include <time.h>

int main(int argc, char **argv) {
	if (argc != 2) {
		fprintf(stderr, "usage: witness FILE\n");
		return 2;
	}
	FILE *out = fopen(argv[1], "w");
	if (!out) {
		perror(argv[1]);
		return 1;
	}
	setvbuf(out, NULL, _IOLBF, 0);
	uint64_t x = 88172645463325252ull;
	for (;;) {
		// ~1 ms of work: xorshift steps, each depending on the last.
		for (int i = 0; i < 1000000; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
		}
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		fprintf(out, "%lld %llu\n", (long long)t.tv_sec * 1000000000LL + t.tv_nsec, (unsigned long long)(x & 1));
	}
}
