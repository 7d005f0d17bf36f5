// Package outfile creates gpuprof's output files (--jsonl, --record,
// --trace) without writing into a file that is not the user's: gpuprof
// often runs as root, and a symbolic or hard link left at the path, in a
// shared directory such as /tmp, would otherwise have it overwrite
// whatever the link leads to.
package outfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"strconv"
	"syscall"

	"github.com/gpuprof/gpuprof/internal/invoker"
)

// Create opens path for writing from its start, as os.Create does, but
// refuses a symbolic link to a file (a link to a device or pipe, such as
// /dev/stdout, is written through), a file with other hard links, and
// another user's file. It truncates only once those are checked. The
// file is open for reading too: a writer cut short (a full disk) reads
// back to its last whole record (events.TraceWriter).
func Create(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o644)
	if errors.Is(err, syscall.ELOOP) {
		return openLink(path)
	}
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && st.Mode().IsRegular() {
		if err = checkOwn(path, st); err == nil {
			err = f.Truncate(0)
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// openLink opens the symbolic link path, not creating what it leads to,
// if it leads to no file or directory.
func openLink(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_CLOEXEC, 0)
	if err == nil {
		st, serr := f.Stat()
		if serr == nil && !st.Mode().IsRegular() && !st.IsDir() {
			return f, nil
		}
		f.Close()
	}
	return nil, linkError(path)
}

func linkError(path string) error {
	to, _ := os.Readlink(path)
	return fmt.Errorf("%s is a symbolic link (to %s): gpuprof does not write through links; remove it or give another path", path, to)
}

// Check says whether Create would refuse path, creating nothing: before
// anything is attached, so that a bad path fails at once.
func Check(path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		if to, err := os.Stat(path); err != nil || to.Mode().IsRegular() || to.IsDir() {
			return linkError(path)
		}
		return nil
	}
	if st.Mode().IsRegular() {
		return checkOwn(path, st)
	}
	return nil
}

// checkOwn refuses a file with other hard links, or owned by another
// user than gpuprof's effective one or the invoking one.
func checkOwn(path string, st fs.FileInfo) error {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if sys.Nlink > 1 {
		return fmt.Errorf("%s has %d hard links: gpuprof does not write into a file linked elsewhere; remove it or give another path", path, sys.Nlink)
	}
	if uid := int(sys.Uid); uid != os.Geteuid() && uid != invoker.UID() {
		name := strconv.Itoa(uid)
		if u, err := user.LookupId(name); err == nil {
			name = u.Username
		}
		return fmt.Errorf("%s belongs to user %s: gpuprof does not overwrite another user's file; remove it or give another path", path, name)
	}
	return nil
}
