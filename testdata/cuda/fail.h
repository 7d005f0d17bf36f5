/*
 * fail.h: how the test programs (demo-trainer, hitloop) end on an error: one
 * line on stderr naming the program, and an exit status. Any CUDA failure
 * ends the run, so that a truth log only ever describes a clean run.
 */
#ifndef GPUPROF_TESTDATA_FAIL_H
#define GPUPROF_TESTDATA_FAIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((noreturn, format(printf, 2, 3)))
static inline void fail(int code, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", program_invocation_short_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

#define CHECK(call)                                                                         \
	do {                                                                               \
		int rc_ = (call);                                                          \
		if (rc_ != 0)                                                              \
			fail(1, "%s failed with error %d", #call, rc_);                    \
	} while (0)

#endif
