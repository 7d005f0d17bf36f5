package pymem

import (
	"fmt"
	"time"
)

// Code is what a frame running a code object shows of it.
type Code struct {
	Func string // co_qualname ("Queue.get"); co_name on 3.10
	File string // co_filename
}

// codeRecheck is how long a code object's names are trusted before the
// object is read again. A frame walk in the kernel records code objects
// by address; user space names them later, and a code object freed and
// another allocated at its address within this would show the old names
// (code objects live as long as their function: in a training loop, for
// the process's life).
const codeRecheck = time.Second

// maxPath is the longest co_filename read.
const maxPath = 4096

// maxCodes bounds the cache: past it, it starts afresh.
const maxCodes = 1 << 16

type codeEntry struct {
	name, file uint64 // the str objects the names were read from
	code       Code
	checked    time.Time
}

// Code names the code object at addr. Names are cached by address and
// checked against the object at most once every codeRecheck; once the
// process is gone the cached names are all there is.
func (r *Reader) Code(addr uint64, now time.Time) (Code, error) {
	r.mu.Lock()
	e := r.codes[addr]
	r.mu.Unlock()
	if e != nil && now.Sub(e.checked) < codeRecheck {
		return e.code, nil
	}
	l := r.l
	if err := objAddr(addr); err != nil {
		return Code{}, err
	}
	hdr := make([]byte, max(l.CodeName, l.CodeFilename)+8)
	if err := r.read(addr, hdr); err != nil {
		if e != nil {
			return e.code, nil // exited, most likely: the names read before
		}
		return Code{}, err
	}
	if ok, err := r.isBuiltin(le.Uint64(hdr[8:]), "code"); err != nil || !ok {
		return Code{}, fmt.Errorf("object at %#x is no code object (%v)", addr, err)
	}
	name, file := le.Uint64(hdr[l.CodeName:]), le.Uint64(hdr[l.CodeFilename:])
	if e != nil && e.name == name && e.file == file {
		r.mu.Lock()
		e.checked = now
		r.mu.Unlock()
		return e.code, nil
	}
	var c Code
	var err error
	if c.Func, err = r.str(name); err != nil {
		return Code{}, fmt.Errorf("code at %#x: name: %w", addr, err)
	}
	// A path that is not ASCII (or too long) is left out rather than
	// losing the frame: its function's name is what says most.
	c.File, _ = r.strUpTo(file, maxPath)
	r.mu.Lock()
	if len(r.codes) >= maxCodes {
		clear(r.codes)
	}
	r.codes[addr] = &codeEntry{name: name, file: file, code: c, checked: now}
	r.mu.Unlock()
	return c, nil
}
