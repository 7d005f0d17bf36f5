package probes

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSymbolizerNamesLibraryLoadedAfterMapsRead: a frame in a library
// the process mapped after its maps were first read (the CUDA runtime
// dlopened just after the attach) is named once the maps are read again,
// not left unnamed for as long as gpuprof runs.
func TestSymbolizerNamesLibraryLoadedAfterMapsRead(t *testing.T) {
	root := t.TempDir()
	const pid = 4242
	maps := filepath.Join(root, "4242", "maps")
	if err := os.MkdirAll(filepath.Dir(maps), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(maps, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s := newSymbolizer(root)
	const addr = 0x7f0000001234
	t0 := time.Unix(1000, 0)
	if f := s.frames(pid, []uint64{addr}, t0)[0]; f.Module != "" {
		t.Fatalf("frame %+v named before any mapping held it", f)
	}
	line := "7f0000000000-7f0000010000 r-xp 00000000 08:01 1234 /usr/lib/libcudart.so.13\n"
	if err := os.WriteFile(maps, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	if f := s.frames(pid, []uint64{addr}, t0.Add(mapsRetry/2))[0]; f.Module != "" {
		t.Fatalf("maps read again %v after the last read, within mapsRetry (%v): %+v", mapsRetry/2, mapsRetry, f)
	}
	f := s.frames(pid, []uint64{addr}, t0.Add(mapsRetry+time.Millisecond))[0]
	if f.Module != "libcudart.so.13" || f.Offset != 0x1234 {
		t.Errorf("frame %+v after the maps were read again, want libcudart.so.13+0x1234 (its file unreadable here, so no symbol)", f)
	}
}
