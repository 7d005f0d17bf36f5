// Cost on this host of an x86 hardware watchpoint (a perf breakpoint event
// as gpuprof opens for a Python function, without its BPF program): a
// trap, and a round of two blocking waits (pipe ping-pong with a second
// thread) while the thread holds one that is never hit.
//   gcc -O2 -pthread -o /tmp/wpbench testdata/gpuhost/wpbench.c && /tmp/wpbench
#define _GNU_SOURCE
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile char watched, idle;
static int p1[2], p2[2];

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }

static int bp(volatile void *addr, pid_t tid) {
	struct perf_event_attr a;
	memset(&a, 0, sizeof a);
	a.type = PERF_TYPE_BREAKPOINT; a.size = sizeof a; a.bp_type = HW_BREAKPOINT_RW;
	a.bp_addr = (uintptr_t)addr; a.bp_len = 1; a.sample_period = 1;
	a.exclude_kernel = 1; a.exclude_hv = 1;
	return syscall(__NR_perf_event_open, &a, tid, -1, -1, 0);
}

static void *echo(void *x) {
	char c;
	(void)x;
	while (read(p1[0], &c, 1) == 1)
		if (write(p2[1], &c, 1) != 1)
			break;
	return 0;
}

static double pingpong(int n) {
	char c = 1;
	double t = now();
	for (int i = 0; i < n; i++)
		if (write(p1[1], &c, 1) != 1 || read(p2[0], &c, 1) != 1)
			return -1;
	return (now() - t) / n;
}

int main(void) {
	int n = 200000;
	double t = now();
	for (int i = 0; i < n; i++) (void)watched;
	double base = (now() - t) / n;
	int fd = bp(&watched, 0);
	if (fd < 0) { perror("perf_event_open"); return 1; }
	t = now();
	for (int i = 0; i < n; i++) (void)watched;
	double trap = (now() - t) / n;
	close(fd);
	printf("watchpoint trap: %.0f ns an access (no BPF; %.1f ns without)\n", trap - base, base);
	if (pipe(p1) || pipe(p2)) { perror("pipe"); return 1; }
	pthread_t th; pthread_create(&th, 0, echo, 0);
	pingpong(20000);
	double off = pingpong(100000);
	fd = bp(&idle, 0);
	double on = pingpong(100000);
	close(fd);
	double off2 = pingpong(100000);
	printf("pipe round trip (2 blocking waits of this thread): %.0f ns, %.0f ns with a watchpoint held (never hit), %.0f ns after: +%.0f ns a round\n", off, on, off2, on - (off + off2) / 2);
	return 0;
}
