package pymem

import (
	"fmt"
)

// NativeFunction finds module.qualname in sys.modules of the process, a
// function written in C: a module's ("_pickle", "loads") or a C class's
// method ("_multiprocessing", "SemLock.acquire"). It returns the address
// of the C function the interpreter calls for it (PyMethodDef.ml_meth):
// where a uprobe times every call, in every thread, with no debug
// register. The function found is the one the name refers to now.
func (r *Reader) NativeFunction(runtime uint64, module, qualname string) (uint64, error) {
	name := module + "." + qualname
	parts, err := nameParts(module, qualname)
	if err != nil {
		return 0, err
	}
	obj, _, err := r.findObject(runtime, module, parts)
	if err != nil {
		return 0, fmt.Errorf("pymem: %w", err)
	}
	t, err := r.objType(obj)
	if err != nil {
		return 0, fmt.Errorf("pymem: %s: its type: %w", name, err)
	}
	var def uint64
	switch t.name {
	case "builtin_function_or_method":
		def, err = r.ptr(obj + r.l.CFunctionML)
	case "method_descriptor":
		def, err = r.ptr(obj + r.l.DescrMethod)
	default:
		return 0, fmt.Errorf("pymem: %s is a %s, not a function written in C", name, t.name)
	}
	if err != nil {
		return 0, fmt.Errorf("pymem: %s: its PyMethodDef: %w", name, err)
	}
	if err := objAddr(def); err != nil {
		return 0, fmt.Errorf("pymem: %s: its PyMethodDef: %w", name, err)
	}
	meth, err := r.ptr(def + r.l.MethodDefMeth)
	if err != nil {
		return 0, fmt.Errorf("pymem: %s: ml_meth: %w", name, err)
	}
	if meth < minAddr || meth >= maxAddr {
		return 0, fmt.Errorf("pymem: %s: ml_meth %#x is no code address", name, meth)
	}
	return meth, nil
}
