package probes

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// /proc/PID/maps is the kernel's, but its paths are whatever the target
// named its files, and a fixture or a container's procfs may be anything.

// FuzzParseMapsLine: a line read is one whose fields parse, and written
// back as the kernel writes it, it reads the same.
func FuzzParseMapsLine(f *testing.F) {
	maps, err := os.ReadFile(filepath.Join("..", "testdata", "proc", "4242", "maps"))
	if err != nil {
		f.Fatal(err)
	}
	for _, line := range strings.Split(string(maps), "\n") {
		f.Add(line)
	}
	f.Add("7f3a1c000000-7f3a1c021000 r-xp 00001000 fd:01 1234567 /usr/lib/lib foo.so (deleted)")
	f.Add("ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]")
	f.Fuzz(func(t *testing.T, line string) {
		m, ok := parseMapsLine(line)
		if !ok {
			return
		}
		if filepath.IsAbs(m.path) && filepath.Clean(m.path) != m.path {
			t.Fatalf("%q read as %+v: a path not clean", line, m)
		}
		if !strings.Contains(line, m.path) || !strings.Contains(line, m.perms) || !strings.Contains(line, m.dev) {
			t.Fatalf("%q read as %+v: not its own fields", line, m)
		}
		if strings.HasSuffix(m.path, " (deleted)") || strings.Contains(m.path, "\n") {
			return // a file itself named "x (deleted)", or a name the kernel escapes
		}
		back := fmt.Sprintf("%x-%x %s %08x %s %d %s", m.start, m.end, m.perms, m.offset, m.dev, m.inode, m.path)
		if m.deleted {
			back += " (deleted)"
		}
		again, ok := parseMapsLine(back)
		if !ok || again != m {
			t.Fatalf("%q read as %+v, written back %q read as %+v (%v)", line, m, back, again, ok)
		}
	})
}

// FuzzExecutableFiles reads any maps file: the files listed are the
// executable mappings of files, each once, reached through the process's
// root.
func FuzzExecutableFiles(f *testing.F) {
	maps, err := os.ReadFile(filepath.Join("..", "testdata", "proc", "4242", "maps"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(maps)
	f.Add([]byte("00400000-00401000 r-xp 00000000 08:01 42 /bin/x\n00401000-00402000 r-xp 00001000 08:01 42 /bin/x\n"))
	root := f.TempDir() // one a worker: its inputs run one at a time
	if err := os.MkdirAll(filepath.Join(root, "7"), 0o755); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, maps []byte) {
		if err := os.WriteFile(filepath.Join(root, "7", "maps"), maps, 0o644); err != nil {
			t.Fatal(err)
		}
		files, err := ExecutableFiles(root, 7)
		if err != nil {
			return // a line over the 1 MB the scanner takes
		}
		seen := map[string]bool{}
		for _, mf := range files {
			if seen[mf.Key()] || mf.Inode == 0 || !strings.HasPrefix(mf.Path, "/") || !strings.Contains(string(maps), mf.Path) {
				t.Fatalf("listed %+v (seen %v)", mf, seen[mf.Key()])
			}
			seen[mf.Key()] = true
			if rel, err := filepath.Rel(filepath.Join(root, "7", "root"), mf.HostPath); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
				t.Fatalf("%s reached at %s, outside the process's root", mf.Path, mf.HostPath)
			}
		}
	})
}
