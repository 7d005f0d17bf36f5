package htmlreport

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// createWhole opens a file to be named path once it is written whole
// (commit): in path's directory, with no name until then (O_TMPFILE), so
// that gpuprof killed while it writes leaves nothing behind. Where the
// file system cannot hold unnamed files, a hidden temporary name beside
// path, which a kill leaves.
func createWhole(path string) (*wholeFile, error) {
	dir := filepath.Dir(path)
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err == nil {
		return &wholeFile{File: os.NewFile(uintptr(fd), path), path: path, unnamed: true}, nil
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return nil, err
	}
	return &wholeFile{File: f, path: path}, nil
}

// wholeFile is a file being written that takes its name when whole.
type wholeFile struct {
	*os.File
	path    string
	unnamed bool
}

// commit closes the file and names it path, over any file there.
func (w *wholeFile) commit() error {
	if err := w.Chmod(0o644); err != nil {
		w.abandon()
		return err
	}
	if !w.unnamed {
		if err := errors.Join(w.Close(), os.Rename(w.Name(), w.path)); err != nil {
			os.Remove(w.Name())
			return err
		}
		return nil
	}
	return errors.Join(w.link(), w.Close())
}

// link names the unnamed file path.
func (w *wholeFile) link() error {
	// Linked by its /proc/self/fd name: AT_EMPTY_PATH would need
	// CAP_DAC_READ_SEARCH. A new name is the file at once; over an old
	// one, a hidden name first, renamed over it (a kill in between
	// leaves the hidden name, for microseconds rather than the whole
	// write).
	proc := fmt.Sprintf("/proc/self/fd/%d", w.Fd())
	err := unix.Linkat(unix.AT_FDCWD, proc, unix.AT_FDCWD, w.path, unix.AT_SYMLINK_FOLLOW)
	if !errors.Is(err, unix.EEXIST) {
		return err
	}
	tmp := filepath.Join(filepath.Dir(w.path), fmt.Sprintf(".%s.%d", filepath.Base(w.path), os.Getpid()))
	os.Remove(tmp)
	if err := unix.Linkat(unix.AT_FDCWD, proc, unix.AT_FDCWD, tmp, unix.AT_SYMLINK_FOLLOW); err != nil {
		return err
	}
	if err := os.Rename(tmp, w.path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// abandon drops the file: an unnamed one goes with its descriptor.
func (w *wholeFile) abandon() {
	w.Close()
	if !w.unnamed {
		os.Remove(w.Name())
	}
}
