package pymem

import (
	"fmt"
)

// typeInfo is what pymem needs of a type object.
type typeInfo struct {
	addr       uint64
	name       string
	basicsize  int64
	flags      uint64
	base       uint64 // tp_base, 0 for object
	dict       uint64 // tp_dict
	dictoffset int64
}

// typeOf is obj's ob_type.
func (r *Reader) typeOf(obj uint64) (uint64, error) {
	if err := objAddr(obj); err != nil {
		return 0, err
	}
	tp, err := r.ptr(obj + 8)
	if err != nil {
		return 0, fmt.Errorf("ob_type: %w", err)
	}
	if err := objAddr(tp); err != nil {
		return 0, fmt.Errorf("ob_type: %w", err)
	}
	return tp, nil
}

// objType is the type of obj.
func (r *Reader) objType(obj uint64) (*typeInfo, error) {
	tp, err := r.typeOf(obj)
	if err != nil {
		return nil, err
	}
	return r.typeInfo(tp)
}

// typeInfo reads the type object at tp. A name that is not a printable C
// string is the usual sign of an address that holds no object.
func (r *Reader) typeInfo(tp uint64) (*typeInfo, error) {
	l := r.l
	if err := objAddr(tp); err != nil {
		return nil, err
	}
	buf := make([]byte, l.TpDictoffset+8)
	if err := r.read(tp, buf); err != nil {
		return nil, err
	}
	name, err := r.cstring(le.Uint64(buf[l.TpName:]), maxName)
	if err != nil {
		return nil, fmt.Errorf("type at %#x: tp_name: %w", tp, err)
	}
	return &typeInfo{
		addr:       tp,
		name:       name,
		basicsize:  int64(le.Uint64(buf[l.TpBasicsize:])),
		flags:      le.Uint64(buf[l.TpFlags:]),
		base:       le.Uint64(buf[l.TpBase:]),
		dict:       le.Uint64(buf[l.TpDict:]),
		dictoffset: int64(le.Uint64(buf[l.TpDictoffset:])),
	}, nil
}

// isBuiltin reports whether tp is the builtin type called name ("str",
// "dict"), reading tp's name only until that type's address is known.
func (r *Reader) isBuiltin(tp uint64, name string) (bool, error) {
	r.mu.Lock()
	known := r.builtin[name]
	r.mu.Unlock()
	if known != 0 {
		return tp == known, nil
	}
	t, err := r.typeInfo(tp)
	if err != nil {
		return false, err
	}
	// A class of that name defined in Python is no builtin.
	if t.name != name || t.flags&r.l.FlagHeap != 0 {
		return false, nil
	}
	r.mu.Lock()
	r.builtin[name] = tp
	r.mu.Unlock()
	return true, nil
}

// attr looks name up in the instance attributes of obj, of type t. Where
// they live depends on the version and on the object's history (see the
// cases); the dict, where there is one, is read by dictLookup.
func (r *Reader) attr(obj uint64, t *typeInfo, name string) (uint64, error) {
	l := r.l
	if t.flags&l.FlagManagedDict != 0 {
		switch r.minor {
		case 11:
			// Values (with the type's shared keys) until something asks
			// for the dict, which then takes them over: NULL values.
			values, err := r.ptr(obj - valuesBelow311)
			if err != nil {
				return 0, fmt.Errorf("values pointer: %w", err)
			}
			if values != 0 {
				return r.splitLookup(t, values, -1, name)
			}
		case 12:
			// One word, tagged: values-1 (low bit set) or the dict.
			dorv, err := r.ptr(obj - managedDictBelow)
			if err != nil {
				return 0, fmt.Errorf("dict-or-values: %w", err)
			}
			if dorv&1 != 0 {
				return r.splitLookup(t, dorv+1, -1, name)
			}
			return r.dictLookup(dorv, name)
		default:
			// 3.13: values inline after the object, in use while valid
			// is set (a dict made by vars() shares them).
			if t.flags&l.FlagInlineValues != 0 {
				if t.basicsize <= 0 || t.basicsize > 1<<20 {
					return 0, fmt.Errorf("implausible tp_basicsize %d", t.basicsize)
				}
				values := obj + uint64(t.basicsize)
				var hdr [4]byte
				if err := r.read(values, hdr[:]); err != nil {
					return 0, fmt.Errorf("inline values: %w", err)
				}
				if hdr[l.ValuesValid] != 0 {
					return r.splitLookup(t, values, int(hdr[l.ValuesCapacity]), name)
				}
			}
		}
		dict, err := r.ptr(obj - managedDictBelow)
		if err != nil {
			return 0, fmt.Errorf("managed dict pointer: %w", err)
		}
		return r.dictLookup(dict, name)
	}
	// 3.10, and classes without a managed dict: a dict pointer at
	// tp_dictoffset (negative only for variable-size objects, which no
	// queue is).
	switch {
	case t.dictoffset == 0:
		return 0, fmt.Errorf("type %s has no instance dict", t.name)
	case t.dictoffset < 0 || t.dictoffset > 1<<20:
		return 0, fmt.Errorf("type %s: unsupported tp_dictoffset %d", t.name, t.dictoffset)
	}
	dict, err := r.ptr(obj + uint64(t.dictoffset))
	if err != nil {
		return 0, fmt.Errorf("dict pointer: %w", err)
	}
	return r.dictLookup(dict, name)
}

// splitLookup finds name in the keys t's instances share and returns its
// value from values (a PyDictValues: the value of entry i is values[i]).
// capacity, where known (3.13), bounds the entries values holds.
func (r *Reader) splitLookup(t *typeInfo, values uint64, capacity int, name string) (uint64, error) {
	if t.flags&r.l.FlagHeap == 0 {
		return 0, fmt.Errorf("type %s is not a heap type but has split values", t.name)
	}
	keys, err := r.ptr(t.addr + r.l.HtCachedKeys)
	if err != nil {
		return 0, fmt.Errorf("type %s: cached keys: %w", t.name, err)
	}
	i, _, err := r.keysLookup(keys, name, maxEntries)
	if err != nil {
		return 0, err
	}
	if capacity >= 0 && i >= capacity {
		return 0, errNoAttr // a key added after this object was made
	}
	return r.value(values, i)
}

// value is values[i] of a PyDictValues, or errNoAttr where it is NULL
// (the instance lacks an attribute other instances have).
func (r *Reader) value(values uint64, i int) (uint64, error) {
	v, err := r.ptr(values + r.l.ValuesArray + uint64(i)*8)
	if err != nil {
		return 0, fmt.Errorf("values[%d]: %w", i, err)
	}
	if v == 0 {
		return 0, errNoAttr
	}
	return v, nil
}

// dictLookup is dict[name] for a dict whose name keys are str: combined
// (keys and values in the keys object) or split (values apart).
func (r *Reader) dictLookup(dict uint64, name string) (uint64, error) {
	return r.dictLookupMax(dict, name, maxEntries)
}

// dictLookupMax is dictLookup in a dict of up to limit entries.
func (r *Reader) dictLookupMax(dict uint64, name string, limit int64) (uint64, error) {
	if dict == 0 {
		return 0, errNoAttr // no dict yet: no attributes
	}
	if err := objAddr(dict); err != nil {
		return 0, fmt.Errorf("dict: %w", err)
	}
	l := r.l
	buf := make([]byte, l.DictValues+8)
	if err := r.read(dict, buf); err != nil {
		return 0, fmt.Errorf("dict: %w", err)
	}
	if ok, err := r.isBuiltin(le.Uint64(buf[8:]), "dict"); err != nil {
		return 0, fmt.Errorf("dict at %#x: its type: %w", dict, err)
	} else if !ok {
		return 0, fmt.Errorf("object at %#x is not a dict", dict)
	}
	keys, values := le.Uint64(buf[l.DictKeys:]), le.Uint64(buf[l.DictValues:])
	i, v, err := r.keysLookup(keys, name, limit)
	if err != nil {
		return 0, err
	}
	if values != 0 {
		return r.value(values, i)
	}
	if v == 0 {
		return 0, errNoAttr
	}
	return v, nil
}

// maxEntries bounds the entries a lookup scans: instance and class dicts
// hold tens; more is garbage or a dict pymem has no business reading.
// Function looks in sys.modules and module dicts, which in a large
// program hold thousands: maxNamespace.
const (
	maxEntries   = 2048
	maxNamespace = 1 << 16
)

// keysLookup scans a PyDictKeysObject's entries for the str key name and
// returns its index and its value in the entry (NULL for split keys),
// scanning at most limit entries. The hash table proper is not used: the
// target's str hashes are keyed by its own random seed.
func (r *Reader) keysLookup(keys uint64, name string, limit int64) (int, uint64, error) {
	l := r.l
	if err := objAddr(keys); err != nil {
		return 0, 0, fmt.Errorf("dict keys: %w", err)
	}
	hdr := make([]byte, l.KeysIndices)
	if err := r.read(keys, hdr); err != nil {
		return 0, 0, fmt.Errorf("dict keys: %w", err)
	}
	// An empty dict shares Py_EMPTY_KEYS, whose sizes (2^0; 3.10: 1) no
	// other keys object has: nothing to look at.
	if le.Uint64(hdr[l.KeysNentries:]) == 0 {
		return 0, 0, errNoAttr
	}
	var indexBytes uint64
	size, keyOff, valOff := l.EntrySize, l.EntryKey, l.EntryValue
	if r.minor == 10 {
		n := le.Uint64(hdr[l.KeysSize:])
		if n < 8 || n > 1<<30 || n&(n-1) != 0 {
			return 0, 0, fmt.Errorf("dict keys at %#x: implausible dk_size %d", keys, n)
		}
		// DK_IXSIZE: the narrowest index that holds dk_size.
		w := uint64(8)
		switch {
		case n <= 0xff:
			w = 1
		case n <= 0xffff:
			w = 2
		case n <= 0xffffffff:
			w = 4
		}
		indexBytes = n * w
	} else {
		log2, log2Index := hdr[l.KeysLog2Size], hdr[l.KeysLog2IndexBytes]
		if log2 < 3 || log2 > 30 || log2Index < log2 || log2Index > log2+3 {
			return 0, 0, fmt.Errorf("dict keys at %#x: implausible sizes 2^%d, 2^%d bytes", keys, log2, log2Index)
		}
		indexBytes = 1 << log2Index
		if uint64(hdr[l.KeysKind]) != l.KindGeneral {
			size, keyOff, valOff = l.UnicodeEntrySize, l.UnicodeEntryKey, l.UnicodeEntryValue
		}
	}
	n := int64(le.Uint64(hdr[l.KeysNentries:]))
	if n < 0 || n > limit {
		return 0, 0, fmt.Errorf("dict keys at %#x: %d entries (more than %d read)", keys, n, limit)
	}
	entries := make([]byte, uint64(n)*size)
	if err := r.read(keys+l.KeysIndices+indexBytes, entries); err != nil {
		return 0, 0, fmt.Errorf("dict entries: %w", err)
	}
	for i := range int(n) {
		e := entries[uint64(i)*size:]
		key := le.Uint64(e[keyOff:])
		if key == 0 {
			continue // deleted
		}
		eq, err := r.strEquals(key, name)
		if err != nil {
			return 0, 0, fmt.Errorf("dict key %d: %w", i, err)
		}
		if eq {
			return i, le.Uint64(e[valOff:]), nil
		}
	}
	return 0, 0, errNoAttr
}

// strHeader reads a str's header and says whether it is a compact ASCII
// str (its characters right after the header) and its length; ok is false
// for any other object.
func (r *Reader) strHeader(s uint64) (n int64, ok bool, err error) {
	l := r.l
	if err := objAddr(s); err != nil {
		return 0, false, err
	}
	hdr := make([]byte, l.StrData)
	if err := r.read(s, hdr); err != nil {
		return 0, false, err
	}
	if ok, err := r.isBuiltin(le.Uint64(hdr[8:]), "str"); err != nil || !ok {
		return 0, false, err
	}
	state := uint64(le.Uint32(hdr[l.StrState:]))
	n = int64(le.Uint64(hdr[l.StrLength:]))
	if state&l.StrCompact == 0 || state&l.StrASCII == 0 || n < 0 {
		return 0, false, nil
	}
	return n, true, nil
}

// strEquals reports whether s is the str name.
func (r *Reader) strEquals(s uint64, name string) (bool, error) {
	n, ok, err := r.strHeader(s)
	if err != nil || !ok || n != int64(len(name)) {
		return false, err
	}
	data := make([]byte, n)
	if err := r.read(s+r.l.StrData, data); err != nil {
		return false, err
	}
	return string(data) == name, nil
}

// str reads the compact ASCII str s, at most maxName characters.
func (r *Reader) str(s uint64) (string, error) { return r.strUpTo(s, maxName) }

// strUpTo reads the compact ASCII str s, at most limit characters.
func (r *Reader) strUpTo(s uint64, limit int64) (string, error) {
	n, ok, err := r.strHeader(s)
	if err != nil {
		return "", err
	}
	if !ok || n > limit {
		return "", fmt.Errorf("object at %#x is not a short ASCII str", s)
	}
	data := make([]byte, n)
	if err := r.read(s+r.l.StrData, data); err != nil {
		return "", err
	}
	// A compact ASCII str holds only ASCII: anything else is memory
	// reused since the frame or the attribute pointed at a str.
	for _, c := range data {
		if c >= 0x80 {
			return "", fmt.Errorf("str at %#x: byte %#x in an ASCII str", s, c)
		}
	}
	return string(data), nil
}
