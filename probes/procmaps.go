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
	path := filepath.Join(procRoot, strconv.Itoa(pid), "maps")
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read maps of PID %d: %w", pid, err)
	}
	defer f.Close()
	seen := map[string]bool{}
	var files []MappedFile
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		m, ok := parseMapsLine(sc.Text())
		if !ok || m.Inode == 0 || !strings.HasPrefix(m.Path, "/") {
			continue
		}
		if seen[m.Key()] {
			continue
		}
		seen[m.Key()] = true
		m.HostPath = filepath.Join(procRoot, strconv.Itoa(pid), "root", m.Path)
		files = append(files, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read maps of PID %d: %w", pid, err)
	}
	return files, nil
}

// parseMapsLine reads one line of /proc/PID/maps, keeping executable file
// mappings:
//
//	7f3a1c000000-7f3a1c021000 r-xp 00001000 fd:01 1234567 /usr/lib/libfoo.so (deleted)
func parseMapsLine(line string) (MappedFile, bool) {
	fields := strings.Fields(line)
	if len(fields) < 6 || len(fields[1]) < 3 || fields[1][2] != 'x' {
		return MappedFile{}, false
	}
	inode, err := strconv.ParseUint(fields[4], 10, 64)
	if err != nil {
		return MappedFile{}, false
	}
	path := strings.Join(fields[5:], " ")
	path = strings.TrimSuffix(path, " (deleted)")
	return MappedFile{Path: path, Dev: fields[3], Inode: inode}, true
}
