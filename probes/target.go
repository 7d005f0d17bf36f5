package probes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/gpuprof/gpuprof/internal/invoker"
)

// TargetPolicy says which processes gpuprof attaches to besides the
// invoking user's own in gpuprof's own PID namespace: by default none, so
// that a mistyped PID on a shared machine does not put probes into
// somebody else's job or another container's.
type TargetPolicy struct {
	OtherUser      bool // --allow-other-user
	OtherContainer bool // --allow-other-container
}

// Target is a process as it was looked up: its PID and its start time,
// which together name it, a PID being reused once its process is reaped.
type Target struct {
	PID   int
	Comm  string
	Start uint64 // clock ticks after boot (/proc/PID/stat field 22)
}

// pfKthread is PF_KTHREAD (linux/sched.h) in /proc/PID/stat's flags.
const pfKthread = 0x00200000

// initNames are the init systems a PID 1 may be. Another PID 1 (a
// container whose entry point is the job itself) is attached to.
var initNames = map[string]bool{"systemd": true, "init": true, "tini": true, "docker-init": true, "dumb-init": true,
	"catatonit": true, "s6-svscan": true, "runit": true, "openrc-init": true, "upstart": true, "pause": true}

// procStat is what LookupTarget reads from /proc/PID/stat.
type procStat struct {
	comm  string
	state byte
	ppid  int
	flags uint64
	start uint64
}

// readStat reads and parses /proc/PID/stat.
func readStat(procRoot string, pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	return parseStat(string(b))
}

// parseStat parses a /proc/PID/stat line. The command name, in
// parentheses, may hold spaces and parentheses itself: the fields start
// after its last ')'.
func parseStat(s string) (procStat, error) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return procStat{}, fmt.Errorf("parse stat %q", s)
	}
	st := procStat{comm: s[open+1 : end]}
	f := strings.Fields(s[end+1:]) // f[0] is field 3 (state)
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("parse stat %q", s)
	}
	var errs [3]error
	st.state = f[0][0]
	st.ppid, errs[0] = strconv.Atoi(f[1])
	st.flags, errs[1] = strconv.ParseUint(f[6], 10, 64)
	st.start, errs[2] = strconv.ParseUint(f[19], 10, 64)
	if err := errors.Join(errs[:]...); err != nil {
		return procStat{}, fmt.Errorf("parse stat: %w", err)
	}
	return st, nil
}

// LookupTarget checks that pid is a process gpuprof may attach to, and
// returns it as it is now; Session.AttachTarget checks it is still that
// process. Each refusal says what to do instead.
func LookupTarget(procRoot string, pid int, p TargetPolicy) (Target, error) {
	st, err := readStat(procRoot, pid)
	if errors.Is(err, fs.ErrNotExist) {
		return Target{}, fmt.Errorf("no process with PID %d: check it with ps -p %d", pid, pid)
	}
	if err != nil {
		return Target{}, fmt.Errorf("read PID %d: %w", pid, err)
	}
	t := Target{PID: pid, Comm: st.comm, Start: st.start}
	switch {
	case st.flags&pfKthread != 0:
		return t, fmt.Errorf("PID %d (%s) is a kernel thread, not a training job: give the job's PID (pgrep -f train.py)", pid, st.comm)
	case st.state == 'Z' || st.state == 'X':
		return t, fmt.Errorf("PID %d (%s) has exited (a zombie its parent, PID %d, has not reaped): give a running job's PID", pid, st.comm, st.ppid)
	case pid == 1 && initNames[st.comm]:
		return t, fmt.Errorf("PID 1 (%s) is the init process, not a training job: give the job's PID (pgrep -f train.py)", st.comm)
	}
	if !p.OtherUser {
		if err := checkOwner(procRoot, t); err != nil {
			return t, err
		}
	}
	if !p.OtherContainer {
		if err := checkNamespace(procRoot, t); err != nil {
			return t, err
		}
	}
	return t, nil
}

// checkOwner refuses a process owned (by real user ID) by another user
// than the invoking one or gpuprof's own: under sudo, a job the user
// started with sudo too is theirs.
func checkOwner(procRoot string, t Target) error {
	uid, err := processUID(procRoot, t.PID)
	if err != nil {
		return fmt.Errorf("read PID %d's owner: %w", t.PID, err)
	}
	me := invoker.UID()
	if uid == me || uid == os.Getuid() {
		return nil
	}
	return fmt.Errorf("PID %d (%s) belongs to %s, not to %s who runs gpuprof: to attach to another user's job anyway, add --allow-other-user",
		t.PID, t.Comm, userName(uid), userName(me))
}

// processUID reads the real user ID from /proc/PID/status.
func processUID(procRoot string, pid int) (int, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return strconv.Atoi(f[0])
			}
		}
	}
	return 0, errors.New("no Uid line in status")
}

func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return fmt.Sprintf("user %s (uid %d)", u.Username, uid)
	}
	return fmt.Sprintf("uid %d", uid)
}

// checkNamespace refuses a process in another PID namespace than
// gpuprof's: another container (or a sandbox of unshare --pid). Only the
// PID namespace tells a container: a mount namespace of its own is also
// what a systemd service with PrivateTmp, or unshare -m, has, and the
// target's files are read through /proc/PID/root wherever it is.
func checkNamespace(procRoot string, t Target) error {
	mine, err := os.Readlink(filepath.Join(procRoot, "self", "ns", "pid"))
	if err != nil {
		return fmt.Errorf("read gpuprof's PID namespace: %w", err)
	}
	theirs, err := os.Readlink(filepath.Join(procRoot, strconv.Itoa(t.PID), "ns", "pid"))
	if err != nil {
		return fmt.Errorf("read PID %d's namespace: %w", t.PID, err)
	}
	if mine == theirs {
		return nil
	}
	return fmt.Errorf("PID %d (%s) runs in another PID namespace than gpuprof (%s, another container): to attach to it anyway, add --allow-other-container",
		t.PID, t.Comm, theirs)
}

// AttachTarget attaches to t (Attach) once it has checked that its PID
// still names the process LookupTarget found: a process that exited and
// was reaped since may have left its PID to another, which is not
// attached to.
func (s *Session) AttachTarget(t Target) ([]LibraryPlan, error) {
	fd, err := openTarget(s.cfg.ProcRoot, t)
	if err != nil {
		return nil, err
	}
	return s.attachFD(t.PID, fd)
}

// openTarget opens a pidfd on t and checks its start time: read after
// the pidfd holds the process, /proc/PID is the pidfd's process or none.
func openTarget(procRoot string, t Target) (int, error) {
	fd, err := unix.PidfdOpen(t.PID, 0)
	if errors.Is(err, unix.ESRCH) {
		return -1, NoProcessError{t.PID}
	}
	if err != nil {
		return -1, fmt.Errorf("open PID %d: %w", t.PID, err)
	}
	st, err := readStat(procRoot, t.PID)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		err = NoProcessError{t.PID}
	case err != nil:
		err = fmt.Errorf("read PID %d: %w", t.PID, err)
	case st.start != t.Start:
		err = fmt.Errorf("PID %d (%s) exited and its PID was taken by another process (%s) before gpuprof attached: nothing was attached; check the job's PID and run again",
			t.PID, t.Comm, st.comm)
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}
