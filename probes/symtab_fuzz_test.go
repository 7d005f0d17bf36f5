package probes

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The ELF files gpuprof reads are the target's: its libraries, its
// interpreter, whatever it mapped executable. FuzzELFSymbols reads any
// file as each of gpuprof's readers does (ReadSymbols for the probes,
// the streamed tables and relocations for frames and launch sites,
// dataSymbol for _PyRuntime) and holds what they return to the file.
// The seeds are two small shared objects (testdata/fuzz: one with
// .plt.sec, one built -fno-plt) and, once built, the stand-in CUDA
// libraries.
func FuzzELFSymbols(f *testing.F) {
	const elfOpens = 3 // ReadSymbols, dataSymbol, readFileSymbols
	built, _ := filepath.Glob(filepath.Join("..", "testdata", "build", "lib*.so*"))
	for _, path := range built {
		if b, err := os.ReadFile(path); err == nil {
			f.Add(b)
		}
	}
	path := filepath.Join(f.TempDir(), "lib.so") // one a worker: its inputs run one at a time
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		syms, err := ReadSymbols(path, func(string) bool { return true })
		if err == nil {
			for name, s := range syms {
				if name != s.Name || strings.Contains(name, "@") || len(s.Code) > codePeek || s.Size > 0 && uint64(len(s.Code)) > s.Size {
					t.Fatalf("symbol %q: %+v", name, s)
				}
				if end := s.FileOffset + uint64(len(s.Code)); end >= s.FileOffset && end <= uint64(len(data)) && !bytes.Equal(s.Code, data[s.FileOffset:end]) {
					t.Fatalf("%s: code %x, the file has %x at %#x", name, s.Code, data[s.FileOffset:end], s.FileOffset)
				}
			}
		}
		dataSymbol(path, "_PyRuntime")
		fs := readFileSymbols(MappedFile{Path: path, HostPath: path})
		if ft := fs.table(); ft != nil {
			defer ft.file.Close()
			for i := range ft.syms {
				s := &ft.syms[i]
				if i > 0 && s.start <= ft.syms[i-1].start {
					t.Fatalf("functions out of order: %#x after %#x", s.start, ft.syms[i-1].start)
				}
				if ft.at(s.start) != s {
					t.Fatalf("the function at %#x is not found there", s.start)
				}
				if raw := ft.raw(s); strings.ContainsRune(raw, 0) || uint64(len(raw)) > ft.tables[s.table].strLen {
					t.Fatalf("function at %#x named %q", s.start, raw)
				}
				ft.short(s)
			}
		}
		for addr := range fs.importTable().slots {
			if name, ok := fs.importTable().name(addr); ok && (name == "" || strings.ContainsRune(name, 0)) {
				t.Fatalf("import at %#x named %q", addr, name)
			}
		}
		// What the file says it holds may be far more than it does: the
		// readers allocate by what they find, a bounded multiple of the
		// file (the stand-in CUDA libraries take ~5x and 200 KB), and
		// debug/elf up to 10 MB an open for the headers a file claims
		// (saferio's chunk), whatever the file holds.
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > elfOpens*10<<20+4<<20+64*uint64(len(data)) {
			t.Fatalf("%d bytes allocated reading a file of %d", n, len(data))
		}
	})
}
