package pymem

// layout is where one CPython minor version keeps what pymem reads (x86-64,
// default build). Field names are those testdata/python/objoffsets.c
// prints, so that TestLayouts holds them to each version's own headers;
// 3.10's dict keys are internal (Objects/dict-common.h, not installed) and
// are held to live interpreters by TestPools only.
type layout struct {
	// PyTypeObject, the same from 3.10 to 3.13.
	TpName, TpBasicsize, TpFlags, TpBase, TpDict, TpDictoffset uint64
	// PyHeapTypeObject: the keys shared by the instances of a class.
	HtCachedKeys uint64
	// PyVarObject: the length of a list or a deque.
	VarSize uint64
	// PyDictObject.
	DictKeys, DictValues uint64
	// PyASCIIObject: a compact ASCII str's characters follow it (StrData
	// is its size); StrCompact and StrASCII are bits of its state word.
	StrLength, StrState, StrData, StrCompact, StrASCII uint64
	// tp_flags: Py_TPFLAGS_HEAPTYPE, _MANAGED_DICT (3.11+), _INLINE_VALUES
	// (3.13+); 0 where the version has no such flag.
	FlagHeap, FlagManagedDict, FlagInlineValues uint64
	// PyDictKeysObject. 3.10: dk_size (KeysSize) and 8-byte fields; 3.11+:
	// log2 sizes in bytes, a kind, and str-keyed entries without a hash.
	KeysSize, KeysLog2Size, KeysLog2IndexBytes, KeysKind, KeysNentries, KeysIndices uint64
	// DICT_KEYS_GENERAL (3.11+): entries with a hash, keys of any type.
	KindGeneral uint64
	// PyDictKeyEntry {hash, key, value}.
	EntrySize, EntryKey, EntryValue uint64
	// PyDictUnicodeEntry {key, value} (3.11+).
	UnicodeEntrySize, UnicodeEntryKey, UnicodeEntryValue uint64
	// PyDictValues: values[] (3.13 puts a header before it), and the
	// header's capacity and valid bytes (3.13).
	ValuesArray, ValuesCapacity, ValuesValid uint64

	// What Function walks from _PyRuntime to a function's bytecode.
	// _PyRuntimeState.interpreters.main, then the interpreter's own
	// reference to sys.modules: interp->modules to 3.11,
	// interp->imports.modules from 3.12.
	RuntimeInterpMain, InterpModules uint64
	// PyModuleObject.md_dict; PyFunctionObject.func_code and func_dict
	// (where functools.wraps puts __wrapped__).
	ModuleDict, FuncCode, FuncDict uint64
	// PyCodeObject: co_flags (an int), and the bytecode the interpreter
	// runs: 3.10 the bytes object co_code (its bytes at BytesData,
	// offsetof(PyBytesObject, ob_sval)); 3.11+ co_code_adaptive, inline
	// in the code object, Py_SIZE(code) code units rewritten in place as
	// the interpreter specialises them.
	CodeFlags, CodeCode, BytesData, CodeAdaptive uint64
	// PyCodeObject: the names a frame running the code shows
	// (Reader.Code): co_qualname (co_name on 3.10, which has no
	// qualname) and co_filename.
	CodeName, CodeFilename uint64
	// A function written in C (NativeFunction): PyCFunctionObject.m_ml
	// of a module's function, PyMethodDescrObject.d_method of a C class's
	// method, and PyMethodDef.ml_meth, the C function either calls.
	CFunctionML, DescrMethod, MethodDefMeth uint64
	// Py_TPFLAGS_TYPE_SUBCLASS: set on type and on every metaclass, so
	// an object whose type has it is a class.
	FlagTypeSubclass uint64
	// co_flags of code whose RESUME runs at every resumption, not once a
	// call: CO_GENERATOR, CO_COROUTINE, CO_ITERABLE_COROUTINE,
	// CO_ASYNC_GENERATOR.
	CoGenerator, CoCoroutine, CoIterableCoroutine, CoAsyncGenerator uint64
}

// Preheader words below an object (3.11+): ((PyObject **)obj)[-3] holds
// the managed dict (3.11, 3.13) or the tagged dict-or-values (3.12);
// ((PyDictValues **)obj)[-4] the values (3.11 only).
const (
	managedDictBelow = 3 * 8
	valuesBelow311   = 4 * 8
)

// dequeState is where a deque keeps its state counter
// (Modules/_collectionsmodule.c, 3.10 to 3.13: {PyObject_VAR_HEAD;
// leftblock; rightblock; leftindex; rightindex; size_t state; ...}): it
// goes up by one on every append and popleft, so between two readings a
// queue.Queue's gets are (Δstate - Δlength) / 2. Not in any installed
// header; TestPools holds it to the puts and gets it makes.
const dequeState = 56

// SemLockObject (Modules/_multiprocessing/semaphore.c, unchanged 3.10 to
// 3.13): {PyObject_HEAD; SEM_HANDLE handle; unsigned long last_tid; int
// count; int maxvalue; int kind; char *name;}. Not in any installed
// header; TestPools holds it to the handle, maxvalue and kind the object
// reports of itself.
const (
	semLockHandle    = 16
	semLockMaxvalue  = 36
	semLockKind      = 40
	semLockSize      = 56
	semKindSemaphore = 1 // SEMAPHORE, not RECURSIVE_MUTEX
)

// wrappedCallable is where staticmethod and classmethod objects keep the
// function they wrap (Objects/funcobject.c, 3.10 to 3.13: {PyObject_HEAD;
// PyObject *sm_callable; PyObject *sm_dict;}, cm_callable alike). Not in
// any installed header; TestFunction holds it to the code of a
// staticmethod and a classmethod that the interpreter reports.
const wrappedCallable = 16

// semValue is the value of a glibc sem_t (x86-64, 64-bit atomics) from
// its first word: struct new_sem {uint64_t data; int private; int pad;},
// the value in data's low 32 bits and the number of waiters above
// (sysdeps/nptl/internaltypes.h).
func semValue(data uint64) int64 { return int64(data & 0xffffffff) }

var layouts = func() map[int]*layout {
	common := layout{
		TpName: 24, TpBasicsize: 32, TpFlags: 168, TpBase: 256, TpDict: 264, TpDictoffset: 288,
		VarSize:  16,
		DictKeys: 32, DictValues: 40,
		StrLength: 16, StrState: 32, StrCompact: 1 << 5, StrASCII: 1 << 6,
		FlagHeap:  1 << 9,
		EntrySize: 24, EntryKey: 8, EntryValue: 16,
		ModuleDict: 16, FuncCode: 48, FuncDict: 88, BytesData: 32,
		CFunctionML: 16, DescrMethod: 40, MethodDefMeth: 8,
		FlagTypeSubclass: 1 << 31, CoGenerator: 0x20, CoCoroutine: 0x80, CoIterableCoroutine: 0x100, CoAsyncGenerator: 0x200,
	}
	v310 := common
	v310.HtCachedKeys = 872
	v310.StrData = 48 // wstr is still there
	v310.KeysSize, v310.KeysNentries, v310.KeysIndices = 8, 32, 40
	v310.RuntimeInterpMain, v310.InterpModules = 40, 856
	v310.CodeFlags, v310.CodeCode = 36, 48
	v310.CodeName, v310.CodeFilename = 112, 104

	v311 := common
	v311.HtCachedKeys = 872
	v311.StrData = 48
	v311.FlagManagedDict = 1 << 4
	v311.KeysLog2Size, v311.KeysLog2IndexBytes, v311.KeysKind = 8, 9, 10
	v311.KeysNentries, v311.KeysIndices = 24, 32
	v311.KindGeneral = 0
	v311.UnicodeEntrySize, v311.UnicodeEntryKey, v311.UnicodeEntryValue = 16, 0, 8
	v311.RuntimeInterpMain, v311.InterpModules = 48, 888
	v311.CodeFlags, v311.CodeAdaptive = 48, 184
	v311.CodeName, v311.CodeFilename = 128, 112

	v312 := v311
	v312.HtCachedKeys = 880 // PyTypeObject grew tp_watched
	v312.StrData = 40       // wstr is gone
	v312.InterpModules = 944
	v312.CodeAdaptive = 192

	v313 := v312
	v313.FlagInlineValues = 1 << 2
	v313.ValuesCapacity, v313.ValuesValid, v313.ValuesArray = 0, 3, 8
	v313.RuntimeInterpMain, v313.InterpModules = 640, 7656
	v313.CodeAdaptive = 200

	return map[int]*layout{10: &v310, 11: &v311, 12: &v312, 13: &v313}
}()
