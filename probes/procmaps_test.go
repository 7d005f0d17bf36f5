package probes

import (
	"debug/elf"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/internal/testenv"
)

func TestExecutableFiles(t *testing.T) {
	root := filepath.Join("..", "testdata", "proc")
	files, err := ExecutableFiles(root, 4242)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, f.Path)
		if !strings.HasPrefix(f.HostPath, filepath.Join(root, "4242", "root")) {
			t.Errorf("%s reached through %s, want through /proc/PID/root", f.Path, f.HostPath)
		}
	}
	want := []string{
		"/usr/bin/python3.12",
		"/opt/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13",
		"/usr/local/nvidia/lib64/libcuda.so.580.159.04",
		"/tmp/libgone.so",
		"/opt/my dir/libspace.so",
		"/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("files\n got %q\nwant %q", got, want)
	}
	layers := map[cudaapi.Layer]int{}
	for _, f := range files {
		layers[cudaapi.LayerOf(f.Base())]++
	}
	if layers[cudaapi.LayerRuntime] != 1 || layers[cudaapi.LayerDriver] != 1 || layers[cudaapi.LayerLoader] != 1 {
		t.Errorf("layers %v", layers)
	}
	if _, err := ExecutableFiles(root, 1); err == nil {
		t.Error("a missing process read")
	}
}

func TestReadSymbolsOfStandIn(t *testing.T) {
	dir := testenv.Fixtures(t)
	// The stand-in runtime exports versioned names, as the real one does.
	syms, err := ReadSymbols(filepath.Join(dir, "libcudart.so.13"), func(n string) bool {
		_, ok := cudaapi.ByName(n)
		return ok
	})
	if err != nil {
		t.Fatal(err)
	}
	s, ok := syms["cudaEventRecord"]
	if !ok {
		t.Fatalf("cudaEventRecord not found among %d symbols", len(syms))
	}
	if s.FileOffset == 0 || len(s.Code) == 0 {
		t.Errorf("symbol %+v", s)
	}
	if p := Place(s.Code); p.Offset != 4 || !p.Emulated {
		t.Errorf("placement %v, want +4 on the push after endbr64", p)
	}
	lp, err := PlanFile(MappedFile{Path: "libcudart.so.13", HostPath: filepath.Join(dir, "libcudart.so.13")}, Options{Launches: true})
	if err != nil || lp.Layer != cudaapi.LayerRuntime || len(lp.Probes) < 20 {
		t.Fatalf("plan %d probes, %v", len(lp.Probes), err)
	}
	if _, err := ReadSymbols("procmaps_test.go", func(string) bool { return true }); err == nil {
		t.Error("a Go file read as ELF")
	}
}

// TestReadSymbolsPrefersDefaultVersion: glibc keeps an old
// pthread_cond_timedwait@GLIBC_2.2.5 beside the default
// pthread_cond_timedwait@@GLIBC_2.3.2 that programs bind to.
func TestReadSymbolsPrefersDefaultVersion(t *testing.T) {
	const libc = "/lib/x86_64-linux-gnu/libc.so.6"
	f, err := elf.Open(libc)
	if err != nil {
		testenv.Skip(t, "no %s to read: %v", libc, err)
	}
	defer f.Close()
	dyn, _ := f.DynamicSymbols()
	var def uint64
	for _, s := range dyn {
		if s.Name == "pthread_cond_timedwait" && s.HasVersion && !s.VersionIndex.IsHidden() {
			def = s.Value
		}
	}
	syms, err := ReadSymbols(libc, func(n string) bool { return n == "pthread_cond_timedwait" })
	if err != nil || def == 0 {
		t.Fatal(err, def)
	}
	if got := syms["pthread_cond_timedwait"].Value; got != def {
		t.Fatalf("pthread_cond_timedwait at %#x, the default version is at %#x", got, def)
	}
}

// TestDeletedMappingReachedByItsLink: a mapping whose file is deleted is
// reached through /proc/PID/map_files where that can be followed, and is
// marked unreachable where it cannot (here: a process root without it).
func TestDeletedMappingReachedByItsLink(t *testing.T) {
	m, ok := parseMapsLine("7f3a1c000000-7f3a1c021000 r-xp 00001000 fd:01 1234567 /usr/lib/lib foo.so (deleted)")
	if !ok || !m.deleted || m.path != "/usr/lib/lib foo.so" {
		t.Fatalf("parsed %+v, %v", m, ok)
	}
	f := m.file(t.TempDir(), 42)
	if !f.Unreachable || f.Path != "/usr/lib/lib foo.so" {
		t.Errorf("deleted file without its map_files link: %+v, want unreachable", f)
	}
	live, _ := parseMapsLine("7f3a1c000000-7f3a1c021000 r-xp 00001000 fd:01 1234567 /usr/lib/libfoo.so")
	if f := live.file("/proc", 42); live.deleted || f.Unreachable || f.HostPath != "/proc/42/root/usr/lib/libfoo.so" {
		t.Errorf("a file in place: %+v", f)
	}
}
