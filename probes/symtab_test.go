package probes

import (
	"debug/elf"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/internal/testenv"
)

// The symbol tables decoded as they stream by name the same functions as
// debug/elf's Symbols: every function symbol's address is found, its
// size kept, and named as one of the names the file gives that address
// (.dynsym's first, where both tables have it).
func TestFuncTableMatchesDebugElf(t *testing.T) {
	dir := testenv.Fixtures(t)
	files := []string{filepath.Join(dir, "demo-trainer"), filepath.Join(dir, "libcudart.so.13")}
	// The system's C library and, where installed, a big C++ one.
	for _, glob := range []string{"/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libLLVM-*.so.1"} {
		if found, _ := filepath.Glob(glob); len(found) > 0 {
			files = append(files, found[0])
		}
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			fs := readFileSymbols(MappedFile{Path: path, HostPath: path})
			if fs.err != nil {
				t.Fatal(fs.err)
			}
			ef, err := elf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer ef.Close()
			names := map[uint64]map[string]bool{}
			dynFirst := map[uint64]string{}
			for ti, read := range []func() ([]elf.Symbol, error){ef.DynamicSymbols, ef.Symbols} {
				syms, err := read()
				if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
					t.Fatal(err)
				}
				for _, s := range syms {
					typ := elf.ST_TYPE(s.Info)
					if (typ != elf.STT_FUNC && typ != elf.STT_GNU_IFUNC) || s.Value == 0 || s.Section == elf.SHN_UNDEF {
						continue
					}
					if names[s.Value] == nil {
						names[s.Value] = map[string]bool{}
					}
					n := cudaapi.StripVersion(s.Name)
					names[s.Value][n] = true
					if _, ok := dynFirst[s.Value]; !ok && ti == 0 {
						dynFirst[s.Value] = n
					}
				}
			}
			if len(names) == 0 {
				t.Fatalf("%s: no function symbols to compare", path)
			}
			for addr, want := range names {
				sym := fs.symbolAt(addr)
				if sym == nil || sym.start != addr {
					t.Fatalf("%s: function at %#x not found", path, addr)
				}
				got := fs.table().raw(sym)
				if !want[got] {
					t.Fatalf("%s: %#x named %q, the file names it %v", path, addr, got, want)
				}
				if d, ok := dynFirst[addr]; ok && got != d {
					t.Errorf("%s: %#x named %q, .dynsym's first name for it is %q", path, addr, got, d)
				}
			}
			if len(fs.table().syms) != len(names) {
				t.Errorf("%s: %d functions kept, the file has %d addresses of functions", path, len(fs.table().syms), len(names))
			}
		})
	}
}

// A name longer than one read of the string table is read whole.
func TestSymbolNameAcrossReads(t *testing.T) {
	dir := t.TempDir()
	long := make([]byte, 700)
	for i := range long {
		long[i] = 'a' + byte(i%26)
	}
	strtab := append(append([]byte{0}, long...), 0, 'x', 0)
	path := filepath.Join(dir, "strtab")
	if err := os.WriteFile(path, append([]byte("pad"), strtab...), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab := symTable{strOff: 3, strLen: uint64(len(strtab))}
	if got := tab.name(f, 1); got != string(long) {
		t.Errorf("long name read as %d bytes %.20q..., want %d", len(got), got, len(long))
	}
	if got := tab.name(f, uint32(len(long)+2)); got != "x" {
		t.Errorf("short name after it read as %q", got)
	}
	if got := tab.name(f, uint32(len(strtab)+5)); got != "" {
		t.Errorf("a name past the table read as %q", got)
	}
}
