package pymem

import (
	"errors"
	"fmt"
)

// findFunction walks from sys.modules[module] down parts and returns the
// function object the last part names.
func (r *Reader) findFunction(runtime uint64, module string, parts []string) (uint64, error) {
	obj, path, err := r.findObject(runtime, module, parts)
	if err != nil {
		return 0, err
	}
	return r.unwrapFunction(obj, path)
}

// findObject walks from sys.modules[module] down parts and returns the
// object the last part names, and its dotted path.
func (r *Reader) findObject(runtime uint64, module string, parts []string) (uint64, string, error) {
	modules, err := r.sysModules(runtime)
	if err != nil {
		return 0, "", err
	}
	mod, err := r.dictLookupMax(modules, module, maxNamespace)
	if errors.Is(err, errNoAttr) {
		return 0, "", fmt.Errorf("module %s is not in sys.modules (not imported?)", module)
	} else if err != nil {
		return 0, "", fmt.Errorf("sys.modules at %#x (is %#x _PyRuntime of CPython 3.%d?): %w", modules, runtime, r.minor, err)
	}
	path, obj := module, mod
	for _, part := range parts {
		ns, err := r.namespace(obj, path)
		if err != nil {
			return 0, "", err
		}
		obj, err = r.dictLookupMax(ns, part, maxNamespace)
		if errors.Is(err, errNoAttr) {
			return 0, "", fmt.Errorf("%s has no attribute %s", path, part)
		} else if err != nil {
			return 0, "", fmt.Errorf("%s.%s: %w", path, part, err)
		}
		path += "." + part
	}
	return obj, path, nil
}

// sysModules is the interpreter's own reference to sys.modules, from
// _PyRuntime.interpreters.main.
func (r *Reader) sysModules(runtime uint64) (uint64, error) {
	l := r.l
	if err := objAddr(runtime); err != nil {
		return 0, fmt.Errorf("_PyRuntime: %w", err)
	}
	interp, err := r.ptr(runtime + l.RuntimeInterpMain)
	if err != nil {
		return 0, fmt.Errorf("_PyRuntime at %#x: interpreters.main: %w", runtime, err)
	}
	if err := objAddr(interp); err != nil {
		return 0, fmt.Errorf("_PyRuntime at %#x: interpreters.main: %w (is that _PyRuntime of CPython 3.%d?)", runtime, err, r.minor)
	}
	modules, err := r.ptr(interp + l.InterpModules)
	if err != nil {
		return 0, fmt.Errorf("_PyRuntime at %#x: main interpreter at %#x: modules: %w", runtime, interp, err)
	}
	return modules, nil
}

// namespace is the dict an attribute of obj (called path) is looked up
// in: a module's md_dict, or a class's own tp_dict (no base classes: a
// qualname names the class that defines the function).
func (r *Reader) namespace(obj uint64, path string) (uint64, error) {
	t, err := r.objType(obj)
	if err != nil {
		return 0, fmt.Errorf("%s: its type: %w", path, err)
	}
	if t.flags&r.l.FlagTypeSubclass != 0 {
		cls, err := r.typeInfo(obj)
		if err != nil {
			return 0, fmt.Errorf("class %s: %w", path, err)
		}
		if cls.dict == 0 {
			return 0, fmt.Errorf("class %s keeps no dict pymem can read (a static builtin type)", path)
		}
		return cls.dict, nil
	}
	isModule, err := r.derives(t, "module")
	if err != nil {
		return 0, fmt.Errorf("%s: its type: %w", path, err)
	}
	if !isModule {
		return 0, fmt.Errorf("%s is a %s, neither a class nor a module", path, t.name)
	}
	d, err := r.ptr(obj + r.l.ModuleDict)
	if err != nil {
		return 0, fmt.Errorf("module %s: md_dict: %w", path, err)
	}
	return d, nil
}

// unwrapFunction is obj, called path, if it is a Python function, or the
// function a staticmethod or classmethod obj wraps.
func (r *Reader) unwrapFunction(obj uint64, path string) (uint64, error) {
	t, err := r.objType(obj)
	if err != nil {
		return 0, fmt.Errorf("%s: its type: %w", path, err)
	}
	for _, wrapper := range []string{"staticmethod", "classmethod"} {
		if ok, err := r.isBuiltin(t.addr, wrapper); err != nil {
			return 0, fmt.Errorf("%s: its type: %w", path, err)
		} else if !ok {
			continue
		}
		if obj, err = r.ptr(obj + wrappedCallable); err != nil {
			return 0, fmt.Errorf("%s: the %s's callable: %w", path, wrapper, err)
		}
		if t, err = r.objType(obj); err != nil {
			return 0, fmt.Errorf("%s: the %s's callable: %w", path, wrapper, err)
		}
		path = fmt.Sprintf("%s (a %s)", path, wrapper)
		break
	}
	if ok, err := r.isBuiltin(t.addr, "function"); err != nil {
		return 0, fmt.Errorf("%s: its type: %w", path, err)
	} else if !ok {
		return 0, fmt.Errorf("%s is a %s, not a Python function", path, t.name)
	}
	return r.unwrapDecorated(obj, path)
}

// maxWraps bounds the decorators followed: real stacks are a few deep.
const maxWraps = 16

// unwrapDecorated follows fn's __wrapped__ (what functools.wraps sets) to
// the function a decorator wrapped. The wrapper's code is the decorator's,
// shared by every function that decorator wrapped, so watching it would
// time them all; the wrapped function's code is its own.
func (r *Reader) unwrapDecorated(fn uint64, path string) (uint64, error) {
	for range maxWraps {
		d, err := r.ptr(fn + r.l.FuncDict)
		if err != nil {
			return 0, fmt.Errorf("%s: func_dict: %w", path, err)
		}
		inner, err := r.dictLookup(d, "__wrapped__")
		if errors.Is(err, errNoAttr) {
			return fn, nil
		} else if err != nil {
			return 0, fmt.Errorf("%s: __wrapped__: %w", path, err)
		}
		t, err := r.objType(inner)
		if err != nil {
			return 0, fmt.Errorf("%s: __wrapped__: its type: %w", path, err)
		}
		if ok, err := r.isBuiltin(t.addr, "function"); err != nil {
			return 0, fmt.Errorf("%s: __wrapped__: its type: %w", path, err)
		} else if !ok {
			return 0, fmt.Errorf("%s wraps a %s (its __wrapped__), not a Python function: the wrapper's code is its decorator's, shared by everything that decorator wraps", path, t.name)
		}
		fn, path = inner, path+".__wrapped__"
	}
	return 0, fmt.Errorf("%s: more than %d decorators", path, maxWraps)
}

// checkType says, unless obj is of the builtin type name, what it is.
func (r *Reader) checkType(obj uint64, name string) error {
	tp, err := r.typeOf(obj)
	if err != nil {
		return err
	}
	if ok, err := r.isBuiltin(tp, name); err != nil {
		return fmt.Errorf("type of object at %#x: %w", obj, err)
	} else if !ok {
		t, err := r.typeInfo(tp)
		if err != nil {
			return fmt.Errorf("type of object at %#x: %w", obj, err)
		}
		return fmt.Errorf("object at %#x is a %s, not a %s", obj, t.name, name)
	}
	return nil
}

// maxBases bounds the walk up a type's bases: real hierarchies are a few
// deep; more is a cycle in garbage.
const maxBases = 32

// derives reports whether t is the builtin type name or derives from it
// (a module's type may be a subclass of module: lazy loaders, packages
// that set sys.modules[__name__].__class__).
func (r *Reader) derives(t *typeInfo, name string) (bool, error) {
	for range maxBases {
		if ok, err := r.isBuiltin(t.addr, name); err != nil || ok {
			return ok, err
		}
		if t.base == 0 {
			return false, nil
		}
		var err error
		if t, err = r.typeInfo(t.base); err != nil {
			return false, err
		}
	}
	return false, fmt.Errorf("type %s: more than %d bases", t.name, maxBases)
}
