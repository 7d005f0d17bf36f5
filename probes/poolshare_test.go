package probes

import "testing"

func TestTranslateSharedMapping(t *testing.T) {
	// The engine maps the semaphore's file at 0x7f00_0000_0000; the
	// trainer at 0x7e00_0000_1000, from file offset 0 too.
	engine := []mapping{{start: 0x400000, end: 0x401000, dev: "08:01", inode: 7},
		{start: 0x7f0000000000, end: 0x7f0000001000, dev: "00:1a", inode: 42}}
	trainer := []mapping{{start: 0x7e0000001000, end: 0x7e0000002000, dev: "00:1a", inode: 42}}
	if at, ok := translate(0x7f0000000020, engine, trainer); !ok || at != 0x7e0000001020 {
		t.Errorf("translate: %#x %v, want 0x7e0000001020", at, ok)
	}
	if _, ok := translate(0x400010, engine, trainer); ok {
		t.Error("a file the trainer does not map translated")
	}
	if _, ok := translate(0x500000, engine, trainer); ok {
		t.Error("an address in no mapping translated")
	}
	// Same file, another part of it.
	other := []mapping{{start: 0x1000, end: 0x2000, offset: 0x1000, dev: "00:1a", inode: 42}}
	if _, ok := translate(0x7f0000000020, engine, other); ok {
		t.Error("translated into a mapping of another part of the file")
	}
}
