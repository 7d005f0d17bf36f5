/*
 * offsets.c: prints the CPython struct offsets gpuprof's Python frame walk
 * reads (probes/python.go), compiled against one version's own headers:
 *
 *   gcc -I$PREFIX/include/python3.X -o offsets offsets.c && ./offsets
 *
 * probes/python_test.go builds it for each pyenv version and compares.
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#if PY_VERSION_HEX >= 0x030b0000
#include "internal/pycore_frame.h"
#endif
#include "internal/pycore_runtime.h"
#if PY_VERSION_HEX < 0x030b0000
#include "frameobject.h"
#endif
#include "internal/pycore_interp.h"
#if PY_VERSION_HEX >= 0x030d0000
#include "internal/pycore_tstate.h"
#endif

#define P(name, expr) printf("%s %ld\n", name, (long)(expr))

int main(void)
{
	P("InterpMain", offsetof(_PyRuntimeState, interpreters.main));
#if PY_VERSION_HEX >= 0x030b0000
	P("ThreadsHead", offsetof(PyInterpreterState, threads.head));
	P("TstateID", offsetof(PyThreadState, native_thread_id));
#else
	P("ThreadsHead", offsetof(PyInterpreterState, tstate_head));
	P("TstateID", offsetof(PyThreadState, thread_id));
#endif
	P("TstateNext", offsetof(PyThreadState, next));
#if PY_VERSION_HEX >= 0x030d0000
	P("TstateFrame", offsetof(PyThreadState, current_frame));
	P("CFrameCurrent", -1);
	P("FrameCode", offsetof(_PyInterpreterFrame, f_executable));
	P("FramePrevious", offsetof(_PyInterpreterFrame, previous));
	P("FrameOwner", offsetof(_PyInterpreterFrame, owner));
	P("FrameLocals", offsetof(_PyInterpreterFrame, localsplus));
#elif PY_VERSION_HEX >= 0x030b0000
	P("TstateFrame", offsetof(PyThreadState, cframe));
	P("CFrameCurrent", offsetof(_PyCFrame, current_frame));
	P("FrameCode", offsetof(_PyInterpreterFrame, f_code));
	P("FramePrevious", offsetof(_PyInterpreterFrame, previous));
	P("FrameOwner", offsetof(_PyInterpreterFrame, owner));
	P("FrameLocals", offsetof(_PyInterpreterFrame, localsplus));
#else
	P("TstateFrame", offsetof(PyThreadState, frame));
	P("CFrameCurrent", -1);
	P("FrameCode", offsetof(PyFrameObject, f_code));
	P("FramePrevious", offsetof(PyFrameObject, f_back));
	P("FrameOwner", -1);
	P("FrameLocals", offsetof(PyFrameObject, f_localsplus));
#endif
	return 0;
}
