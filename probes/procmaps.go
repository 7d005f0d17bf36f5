package probes

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// MappedFile is a file a process has mapped with execute permission.
type MappedFile struct {
	Path     string // as the process sees it (from /proc/PID/maps)
	HostPath string // the same file seen from here, through /proc/PID/root
	Dev      string // major:minor
	Inode    uint64
	// Unreachable: the path names the file mapped no longer (deleted, or
	// replaced) and /proc/PID/map_files could not be followed (no
	// CAP_SYS_ADMIN): HostPath does not reach the file mapped.
	Unreachable bool
}

// unreachableError says what to do about a file f.Unreachable.
func (f MappedFile) unreachableError(pid int) error {
	return fmt.Errorf("%s was deleted or replaced while PID %d maps it: gpuprof reaches the file a process maps only with CAP_SYS_ADMIN (through /proc/PID/map_files): run it as root, or restart the job", f.Path, pid)
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
	deleted            bool // the file's name is gone (maps says "(deleted)")
}

// file is the file mapped, reached from here through /proc/PID/root; or,
// where its path no longer names it (deleted, or replaced by a rename
// over it: an upgrade under a running job; maps says "(deleted)" for
// both), through the mapping's own link in /proc/PID/map_files, which
// needs CAP_SYS_ADMIN to follow: a uprobe on the file the path names now
// would never fire in the process. (A path that names a file of another
// inode but is not deleted is taken as it is: on overlayfs with xino, a
// container's, stat's inode is not the layer's that maps shows.)
func (m mapping) file(procRoot string, pid int) MappedFile {
	f := MappedFile{Path: m.path, Dev: m.dev, Inode: m.inode,
		HostPath: filepath.Join(procRoot, strconv.Itoa(pid), "root", m.path)}
	if !m.deleted {
		return f
	}
	mapped := filepath.Join(procRoot, strconv.Itoa(pid), "map_files", fmt.Sprintf("%x-%x", m.start, m.end))
	var st unix.Stat_t
	if unix.Stat(mapped, &st) == nil && st.Ino == m.inode {
		f.HostPath = mapped
	} else {
		f.Unreachable = true
	}
	return f
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
	path := strings.TrimLeft(rest, " ")
	m.path = strings.TrimSuffix(path, " (deleted)")
	m.deleted = m.path != path
	// The kernel writes a file's path as d_path makes it, clean; one with
	// "..", joined below /proc/PID/root, would reach a file outside the
	// process's root. Such a mapping is kept, as no file's.
	if filepath.IsAbs(m.path) && filepath.Clean(m.path) != m.path {
		m.path = ""
	}
	return m, true
}
