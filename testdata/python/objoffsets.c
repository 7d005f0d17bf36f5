/*
 * objoffsets.c: prints the CPython object layout pymem reads (pymem/layout.go),
 * compiled against one version's own headers:
 *
 *   gcc -I$PREFIX/include/python3.X -o objoffsets objoffsets.c && ./objoffsets
 *
 * pymem's TestLayouts builds it for each pyenv version and compares. It
 * also checks glibc's sem_t encoding, which multiprocessing's queues count
 * with. PyDictKeysObject is internal before 3.11 (Objects/dict-common.h,
 * not installed), so 3.10's keys layout is checked only by reading live
 * interpreters (TestPools). _PyRuntimeState, PyInterpreterState and
 * PyModuleObject are in the installed internal/ headers (Py_BUILD_CORE).
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <semaphore.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#if PY_VERSION_HEX >= 0x030b0000
#include "internal/pycore_dict.h"
#endif
#include "internal/pycore_interp.h"
#include "internal/pycore_moduleobject.h"
#include "internal/pycore_runtime.h"

#define P(name, expr) printf("%s %ld\n", name, (long)(expr))

/* The 32-bit word of a str's state bitfield with only the bits set() sets. */
#define STATE_BITS(set)                                                  \
	do {                                                             \
		PyASCIIObject a;                                         \
		uint32_t w;                                              \
		memset(&a, 0, sizeof a);                                 \
		set;                                                     \
		memcpy(&w, (char *)&a + offsetof(PyASCIIObject, state), \
		       sizeof w);                                        \
		bits = w;                                                \
	} while (0)

int main(void)
{
	uint32_t bits;
	sem_t sem;
	uint64_t data;

	P("TpName", offsetof(PyTypeObject, tp_name));
	P("TpBasicsize", offsetof(PyTypeObject, tp_basicsize));
	P("TpFlags", offsetof(PyTypeObject, tp_flags));
	P("TpBase", offsetof(PyTypeObject, tp_base));
	P("TpDict", offsetof(PyTypeObject, tp_dict));
	P("TpDictoffset", offsetof(PyTypeObject, tp_dictoffset));
	P("HtCachedKeys", offsetof(PyHeapTypeObject, ht_cached_keys));
	P("VarSize", offsetof(PyVarObject, ob_size));
	P("DictKeys", offsetof(PyDictObject, ma_keys));
	P("DictValues", offsetof(PyDictObject, ma_values));
	P("StrLength", offsetof(PyASCIIObject, length));
	P("StrState", offsetof(PyASCIIObject, state));
	P("StrData", sizeof(PyASCIIObject));
	STATE_BITS(a.state.compact = 1);
	P("StrCompact", bits);
	STATE_BITS(a.state.ascii = 1);
	P("StrASCII", bits);
	P("FlagHeap", Py_TPFLAGS_HEAPTYPE);
#if PY_VERSION_HEX >= 0x030b0000
	P("FlagManagedDict", Py_TPFLAGS_MANAGED_DICT);
	P("KeysLog2Size", offsetof(PyDictKeysObject, dk_log2_size));
	P("KeysLog2IndexBytes", offsetof(PyDictKeysObject, dk_log2_index_bytes));
	P("KeysKind", offsetof(PyDictKeysObject, dk_kind));
	P("KeysNentries", offsetof(PyDictKeysObject, dk_nentries));
	P("KeysIndices", offsetof(PyDictKeysObject, dk_indices));
	P("KindGeneral", DICT_KEYS_GENERAL);
	P("EntrySize", sizeof(PyDictKeyEntry));
	P("EntryKey", offsetof(PyDictKeyEntry, me_key));
	P("EntryValue", offsetof(PyDictKeyEntry, me_value));
	P("UnicodeEntrySize", sizeof(PyDictUnicodeEntry));
	P("UnicodeEntryKey", offsetof(PyDictUnicodeEntry, me_key));
	P("UnicodeEntryValue", offsetof(PyDictUnicodeEntry, me_value));
	P("ValuesArray", offsetof(PyDictValues, values));
#endif
#if PY_VERSION_HEX >= 0x030d0000
	P("FlagInlineValues", Py_TPFLAGS_INLINE_VALUES);
	P("ValuesCapacity", offsetof(PyDictValues, capacity));
	P("ValuesValid", offsetof(PyDictValues, valid));
#endif

	/* From _PyRuntime to a function's bytecode (pymem.Function). */
	P("RuntimeInterpMain", offsetof(_PyRuntimeState, interpreters.main));
#if PY_VERSION_HEX >= 0x030c0000
	P("InterpModules", offsetof(PyInterpreterState, imports.modules));
#else
	P("InterpModules", offsetof(PyInterpreterState, modules));
#endif
	P("ModuleDict", offsetof(PyModuleObject, md_dict));
	P("FuncCode", offsetof(PyFunctionObject, func_code));
	P("FuncDict", offsetof(PyFunctionObject, func_dict));
	P("CFunctionML", offsetof(PyCFunctionObject, m_ml));
	P("DescrMethod", offsetof(PyMethodDescrObject, d_method));
	P("MethodDefMeth", offsetof(PyMethodDef, ml_meth));
	P("CodeFlags", offsetof(PyCodeObject, co_flags));
#if PY_VERSION_HEX >= 0x030b0000
	P("CodeAdaptive", offsetof(PyCodeObject, co_code_adaptive));
#else
	P("CodeCode", offsetof(PyCodeObject, co_code));
#endif
#if PY_VERSION_HEX >= 0x030b0000
	P("CodeName", offsetof(PyCodeObject, co_qualname));
#else
	P("CodeName", offsetof(PyCodeObject, co_name));
#endif
	P("CodeFilename", offsetof(PyCodeObject, co_filename));
	P("BytesData", offsetof(PyBytesObject, ob_sval));
	P("FlagTypeSubclass", Py_TPFLAGS_TYPE_SUBCLASS);
	P("CoGenerator", CO_GENERATOR);
	P("CoCoroutine", CO_COROUTINE);
	P("CoIterableCoroutine", CO_ITERABLE_COROUTINE);
	P("CoAsyncGenerator", CO_ASYNC_GENERATOR);

	/* glibc's sem_t, the first 64-bit word of a semaphore at 7 taken once:
	 * pymem expects the value (6) in its low 32 bits, waiters above. */
	sem_init(&sem, 1, 7);
	sem_wait(&sem);
	memcpy(&data, &sem, sizeof data);
	printf("SemWordAfterWait %llu\n", (unsigned long long)data);
	return 0;
}
