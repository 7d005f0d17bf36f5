package pymem

import (
	"testing"
	"time"
)

// What pymem reads is the target's memory: any bytes, pointers and length
// fields at all where an object was freed and its memory reused, or where
// a frame walk's address was stale. The fuzz tests hold each reader to
// an error or a result within its bounds, and to no read (pymem's only
// allocations sized by the target) longer than the longest it allows.

// maxRead is the longest read pymem may ask for: a function's bytecode.
const maxRead = maxBytecode

// FuzzScan decodes any bytecode: the entry is a RESUME with oparg 0 (the
// first instruction on 3.10), and the returns are return instructions,
// in order, every offset inside the code and instruction-aligned.
func FuzzScan(f *testing.F) {
	f.Add(10, []byte{9, 0, 83, 0})
	f.Add(11, []byte{150, 0, 116, 1, 83, 0, 83, 0, 83, 0, 83, 0, 83, 0, 122, 0, 83, 0, 83, 0})
	f.Add(11, []byte{144, 1, 151, 0, 151, 0, 83, 0})
	f.Add(12, []byte{151, 0, 121, 0, 83, 0})
	f.Add(13, []byte{149, 0, 70, 0, 36, 0})
	f.Fuzz(func(t *testing.T, minor int, code []byte) {
		entry, returns, err := scan(minor, code)
		if err != nil {
			return
		}
		ops := opTables[minor]
		if len(code)%2 != 0 {
			t.Fatalf("scanned %d bytes: not whole code units", len(code))
		}
		if entry < 0 || entry >= len(code) || entry%2 != 0 {
			t.Fatalf("entry %d in %d bytes", entry, len(code))
		}
		if minor >= 11 && (ops[code[entry]].kind != opResume || code[entry+1] != 0) {
			t.Fatalf("entry %d: opcode %d oparg %d, not RESUME 0", entry, code[entry], code[entry+1])
		}
		for i, r := range returns {
			if r < 0 || r >= len(code) || r%2 != 0 || (i > 0 && r <= returns[i-1]) {
				t.Fatalf("returns %v in %d bytes", returns, len(code))
			}
			if ops[code[r]].kind != opReturn {
				t.Fatalf("return at %d is opcode %d", r, code[r])
			}
		}
	})
}

// FuzzCode names a code object in any memory: a name of at most maxName
// and a file of at most maxPath ASCII characters, the same twice (the
// second from the cache).
func FuzzCode(f *testing.F) {
	f.Fuzz(func(t *testing.T, image []byte, minor int, addr uint64) {
		r, m := imageReader(image, minor)
		if r == nil {
			return
		}
		now := time.Unix(1e9, 0)
		c, err := r.Code(addr, now)
		if m.largest > maxRead {
			t.Fatalf("read %d bytes at once", m.largest)
		}
		if err != nil {
			return
		}
		if len(c.Func) > maxName || len(c.File) > maxPath || !ascii(c.Func) || !ascii(c.File) {
			t.Fatalf("names %q %q: not short ASCII", c.Func, c.File)
		}
		if again, err := r.Code(addr, now); err != nil || again != c {
			t.Fatalf("read again: %+v, %v; first %+v", again, err, c)
		}
	})
}

// FuzzPool resolves a sample pool in any memory: a pool of a kind pymem
// knows, whose length then reads as a count.
func FuzzPool(f *testing.F) {
	f.Fuzz(func(t *testing.T, image []byte, minor int, obj uint64) {
		r, m := imageReader(image, minor)
		if r == nil {
			return
		}
		p, err := r.Pool(obj)
		if m.largest > maxRead {
			t.Fatalf("read %d bytes at once", m.largest)
		}
		if err != nil {
			return
		}
		if p.Kind != KindQueue && p.Kind != KindMPQueue {
			t.Fatalf("pool of kind %q", p.Kind)
		}
		n, err := p.Len()
		if err != nil || n < 0 {
			t.Fatalf("length %d, %v, of a pool just read", n, err)
		}
		addr, max := p.Word()
		if objAddr(addr&^7) != nil || (p.Kind == KindQueue) != (max == 0) {
			t.Fatalf("%s: word at %#x, max %d", p.Kind, addr, max)
		}
		if _, ok := p.StateWord(); ok && (p.Kind != KindQueue || !p.deque) {
			t.Fatalf("%s (deque %v) has a state word", p.Kind, p.deque)
		}
	})
}

// FuzzFunction finds a function in any memory: its entry and returns lie
// in one bytecode, instruction-aligned, the returns after one another; a
// C function's address is a user-space one.
func FuzzFunction(f *testing.F) {
	f.Fuzz(func(t *testing.T, image []byte, minor int, runtime uint64, module, qualname string) {
		r, m := imageReader(image, minor)
		if r == nil {
			return
		}
		fn, err := r.Function(runtime, module, qualname)
		if m.largest > maxRead {
			t.Fatalf("read %d bytes at once", m.largest)
		}
		if err == nil {
			if fn.Module != module || fn.Qualname != qualname || fn.EntryIsResume != (minor >= 11) {
				t.Fatalf("asked for %s.%s (3.%d), got %+v", module, qualname, minor, fn)
			}
			for i, ret := range fn.Returns {
				if d := ret - fn.Entry; d%2 != 0 || (d > maxBytecode && -d > maxBytecode) || (i > 0 && ret <= fn.Returns[i-1]) {
					t.Fatalf("entry %#x, returns %#x: not one bytecode's instructions", fn.Entry, fn.Returns)
				}
			}
		}
		m.largest = 0
		meth, err := r.NativeFunction(runtime, module, qualname)
		if m.largest > maxRead {
			t.Fatalf("read %d bytes at once", m.largest)
		}
		if err == nil && (meth < minAddr || meth >= maxAddr) {
			t.Fatalf("C function at %#x", meth)
		}
	})
}

func ascii(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
