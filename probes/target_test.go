package probes

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeProc writes a /proc with one process: its stat line, its real uid,
// and its PID namespace and gpuprof's (self's).
func fakeProc(t *testing.T, pid int, stat string, uid int, ns, selfNS string) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, strconv.Itoa(pid))
	for _, d := range []string{filepath.Join(dir, "ns"), filepath.Join(root, "self", "ns")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	status := "Name:\tx\nUid:\t" + strconv.Itoa(uid) + "\t0\t0\t0\n"
	for _, err := range []error{
		os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644),
		os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644),
		os.Symlink(ns, filepath.Join(dir, "ns", "pid")),
		os.Symlink(selfNS, filepath.Join(root, "self", "ns", "pid")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// statLine is a /proc/PID/stat line with comm, state, ppid, flags and
// start time in their places (fields 2, 3, 4, 9 and 22).
func statLine(pid int, comm string, state byte, ppid int, flags, start uint64) string {
	f := []string{strconv.Itoa(pid), "(" + comm + ")", string(state), strconv.Itoa(ppid)}
	for i := 5; i <= 52; i++ {
		switch i {
		case 9:
			f = append(f, strconv.FormatUint(flags, 10))
		case 22:
			f = append(f, strconv.FormatUint(start, 10))
		default:
			f = append(f, "0")
		}
	}
	return strings.Join(f, " ") + "\n"
}

func TestParseStat(t *testing.T) {
	// A command name may hold spaces and parentheses.
	st, err := parseStat(statLine(7, "a) (b c", 'S', 3, 0x400100, 12345))
	if err != nil {
		t.Fatal(err)
	}
	if st.comm != "a) (b c" || st.state != 'S' || st.ppid != 3 || st.flags != 0x400100 || st.start != 12345 {
		t.Errorf("parsed %+v", st)
	}
	for _, bad := range []string{"", "7 (x", "7 (x) S 1", "7 (x) S one " + strings.Repeat("0 ", 30)} {
		if _, err := parseStat(bad); err == nil {
			t.Errorf("parseStat(%q): no error", bad)
		}
	}
}

func TestLookupTarget(t *testing.T) {
	me := os.Getuid()
	const pid = 4242
	for _, c := range []struct {
		name     string
		stat     string
		uid      int
		ns       string
		policy   TargetPolicy
		wantErr  string // "" accepted
		wantComm string
	}{
		{"own process", statLine(pid, "python3", 'S', 1, 0, 99), me, "pid:[1]", TargetPolicy{}, "", "python3"},
		{"kernel thread", statLine(pid, "kworker/0:1", 'I', 2, pfKthread, 5), 0, "pid:[1]", TargetPolicy{OtherUser: true}, "is a kernel thread", ""},
		{"zombie", statLine(pid, "python3", 'Z', 17, 0, 99), me, "pid:[1]", TargetPolicy{}, "a zombie its parent, PID 17", ""},
		{"dead", statLine(pid, "python3", 'X', 17, 0, 99), me, "pid:[1]", TargetPolicy{}, "has exited", ""},
		{"another user's", statLine(pid, "python3", 'S', 1, 0, 99), me + 1000, "pid:[1]", TargetPolicy{}, "add --allow-other-user", ""},
		{"another user's, allowed", statLine(pid, "python3", 'S', 1, 0, 99), me + 1000, "pid:[1]", TargetPolicy{OtherUser: true}, "", "python3"},
		{"another container's", statLine(pid, "python3", 'S', 1, 0, 99), me, "pid:[2]", TargetPolicy{}, "add --allow-other-container", ""},
		{"another container's, allowed", statLine(pid, "python3", 'S', 1, 0, 99), me, "pid:[2]", TargetPolicy{OtherContainer: true}, "", "python3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := fakeProc(t, pid, c.stat, c.uid, c.ns, "pid:[1]")
			tg, err := LookupTarget(root, pid, c.policy)
			switch {
			case c.wantErr == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Errorf("error %v, want one containing %q", err, c.wantErr)
			case c.wantErr == "" && (tg.Comm != c.wantComm || tg.Start != 99 || tg.PID != pid):
				t.Errorf("target %+v", tg)
			}
		})
	}
	// PID 1: an init is refused, a job that is PID 1 is not.
	for comm, refused := range map[string]bool{"systemd": true, "tini": true, "python3": false} {
		root := fakeProc(t, 1, statLine(1, comm, 'S', 0, 0, 1), me, "pid:[1]", "pid:[1]")
		_, err := LookupTarget(root, 1, TargetPolicy{})
		if refused != (err != nil && strings.Contains(err.Error(), "is the init process")) {
			t.Errorf("PID 1 %s: %v", comm, err)
		}
	}
	if _, err := LookupTarget(t.TempDir(), pid, TargetPolicy{}); err == nil || !strings.Contains(err.Error(), "no process with PID 4242") {
		t.Errorf("no such process: %v", err)
	}
}
