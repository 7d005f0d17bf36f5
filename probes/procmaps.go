package probes

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// MappedFile is a file a process has mapped with execute permission.
type MappedFile struct {
	Path     string // as the process sees it (from /proc/PID/maps)
	HostPath string // the same file seen from here, through /proc/PID/root
	Dev      string // major:minor
	Inode    uint64
}

// Key identifies the file independently of the path used to reach it.
func (f MappedFile) Key() string { return f.Dev + ":" + strconv.FormatUint(f.Inode, 10) }

// Base is the file's base name.
func (f MappedFile) Base() string { return filepath.Base(f.Path) }

// ExecutableFiles lists the files PID maps executable, in order of first
// mapping. procRoot is normally "/proc"; tests point it at fixtures.
func ExecutableFiles(procRoot string, pid int) ([]MappedFile, error) {
	maps, err := readMaps(procRoot, pid)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var files []MappedFile
	for _, m := range maps {
		if len(m.perms) < 3 || m.perms[2] != 'x' || m.inode == 0 || !strings.HasPrefix(m.path, "/") {
			continue
		}
		f := m.file(procRoot, pid)
		if seen[f.Key()] {
			continue
		}
		seen[f.Key()] = true
		files = append(files, f)
	}
	return files, nil
}

// mapping is one line of /proc/PID/maps:
//
//	7f3a1c000000-7f3a1c021000 r-xp 00001000 fd:01 1234567 /usr/lib/libfoo.so (deleted)
type mapping struct {
	start, end, offset uint64
	perms, dev, path   string // path without " (deleted)"; "" for anonymous memory
	inode              uint64
}

// file is the file mapped, reached from here through /proc/PID/root.
func (m mapping) file(procRoot string, pid int) MappedFile {
	return MappedFile{Path: m.path, Dev: m.dev, Inode: m.inode,
		HostPath: filepath.Join(procRoot, strconv.Itoa(pid), "root", m.path)}
}

// holds says whether the mapping is of the file f.
func (m mapping) holds(f MappedFile) bool { return m.dev == f.Dev && m.inode == f.Inode }

// readMaps reads every line of /proc/PID/maps.
func readMaps(procRoot string, pid int) ([]mapping, error) {
	f, err := os.Open(filepath.Join(procRoot, strconv.Itoa(pid), "maps"))
	if err != nil {
		return nil, fmt.Errorf("read maps of PID %d: %w", pid, err)
	}
	defer f.Close()
	var out []mapping
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if m, ok := parseMapsLine(sc.Text()); ok {
			out = append(out, m)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read maps of PID %d: %w", pid, err)
	}
	return out, nil
}

// parseMapsLine reads the five fields the kernel writes, one space
// apart, and the path after the spaces that pad it to a column: the path
// as the target named its file, spaces and all.
func parseMapsLine(line string) (mapping, bool) {
	var fields [5]string
	rest := line
	for i := range fields {
		var ok bool
		fields[i], rest, ok = strings.Cut(strings.TrimLeft(rest, " "), " ")
		if fields[i] == "" || !ok && i < len(fields)-1 {
			return mapping{}, false
		}
	}
	lo, hi, _ := strings.Cut(fields[0], "-")
	var m mapping
	var errs [4]error
	m.start, errs[0] = strconv.ParseUint(lo, 16, 64)
	m.end, errs[1] = strconv.ParseUint(hi, 16, 64)
	m.offset, errs[2] = strconv.ParseUint(fields[2], 16, 64)
	m.inode, errs[3] = strconv.ParseUint(fields[4], 10, 64)
	for _, err := range errs {
		if err != nil {
			return mapping{}, false
		}
	}
	m.perms, m.dev = fields[1], fields[3]
	m.path = strings.TrimSuffix(strings.TrimLeft(rest, " "), " (deleted)")
	// The kernel writes a file's path as d_path makes it, clean; one with
	// "..", joined below /proc/PID/root, would reach a file outside the
	// process's root. Such a mapping is kept, as no file's.
	if filepath.IsAbs(m.path) && filepath.Clean(m.path) != m.path {
		m.path = ""
	}
	return m, true
}
