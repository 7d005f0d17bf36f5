/*
 * testprog.h: what the test programs (demo-trainer, hitloop) share: how they
 * end on an error (one line on stderr naming the program, and an exit
 * status; any CUDA failure ends the run, so that a truth log only ever
 * describes a clean run), and how they load the CUDA libraries.
 */
#ifndef GPUPROF_TESTDATA_TESTPROG_H
#define GPUPROF_TESTDATA_TESTPROG_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
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

/* open_lib loads dir/file like PyTorch loads CUDA: dlopen, no link. */
static inline void *open_lib(const char *dir, const char *file)
{
	char path[PATH_MAX];
	void *h;

	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		fail(1, "library path too long: %s/%s", dir, file);
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL)
		fail(1, "cannot load %s", dlerror());
	return h;
}

static inline void *symbol(void *lib, const char *name)
{
	void *p = dlsym(lib, name);

	if (p == NULL)
		fail(1, "no symbol %s: %s", name, dlerror());
	return p;
}

#endif
