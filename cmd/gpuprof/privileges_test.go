package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuprof/gpuprof/internal/testenv"
)

// Least privilege (issue 30, item 6): the capabilities gpuprof needs,
// the targets it refuses by default, the addresses it listens on.

// TestRefusesOtherUsersTarget: a process of another user than the one
// running gpuprof (under sudo, the one who ran sudo: SUDO_UID) is refused
// unless --allow-other-user; gpuprof's own user's (root's, under sudo) is
// not.
func TestRefusesOtherUsersTarget(t *testing.T) {
	testenv.RequireRoot(t)
	needTools(t, "setpriv")
	nobody := startCmd(t, exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "30"))
	pid := itoa(nobody.Process.Pid)
	waitFor(t, func() bool { return procComm(nobody.Process.Pid) == "sleep" }, "setpriv to exec sleep")
	oneLine(t, gpuprof(t, "attach", "--pid", pid, "-d", "1s"), 1,
		"PID "+pid+" (sleep) belongs to user nobody (uid 65534), not to user root (uid 0) who runs gpuprof: to attach to another user's job anyway, add --allow-other-user")
	accepted(t, gpuprof(t, "attach", "--pid", pid, "-d", "1s", "--allow-other-user"), pid)

	asSudo := func(sudoUID string, args ...string) result {
		cmd := exec.Command(gpuprofBin, args...)
		cmd.Env = append(os.Environ(), "SUDO_UID="+sudoUID)
		return runCommand(t, cmd)
	}
	// sudo gpuprof by uid 65534: its own job.
	accepted(t, asSudo("65534", "attach", "--pid", pid, "-d", "1s"), pid)
	// sudo gpuprof by uid 1234: not theirs.
	oneLine(t, asSudo("1234", "attach", "--pid", pid, "-d", "1s"), 1, "not to uid 1234 who runs gpuprof")
	// sudo gpuprof by uid 1234 to a job run by sudo too (root's).
	rootSleep := startSleep(t)
	accepted(t, asSudo("1234", "attach", "--pid", itoa(rootSleep.Process.Pid), "-d", "1s"), itoa(rootSleep.Process.Pid))
}

// TestRefusesOtherContainersTarget: a process in another PID namespace
// (a container: here unshare --pid --fork --mount-proc) is refused unless
// --allow-other-container, and attached to by its PID here with it.
func TestRefusesOtherContainersTarget(t *testing.T) {
	testenv.RequireRoot(t)
	needTools(t, "unshare")
	sandbox := startCmd(t, exec.Command("unshare", "--pid", "--fork", "--mount-proc", "sleep", "30"))
	var inside int
	waitFor(t, func() bool {
		inside = onlyChild(sandbox.Process.Pid)
		return inside > 0 && procComm(inside) == "sleep"
	}, "unshare to start sleep")
	pid := itoa(inside)
	oneLine(t, gpuprof(t, "attach", "--pid", pid, "-d", "1s"), 1,
		"PID "+pid+" (sleep) runs in another PID namespace than gpuprof")
	oneLine(t, gpuprof(t, "attach", "--pid", pid, "-d", "1s"), 1, "add --allow-other-container")
	accepted(t, gpuprof(t, "attach", "--pid", pid, "-d", "1s", "--allow-other-container"), pid)
}

// accepted checks that attach took the target: it waited for it to load
// CUDA until -d ran out.
func accepted(t *testing.T, r result, pid string) {
	t.Helper()
	if r.code != 0 || !strings.Contains(r.stderr, "waiting for PID "+pid+" to load a CUDA library") {
		t.Errorf("attach to PID %s refused: %+v", pid, r)
	}
}

func startCmd(t *testing.T, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

func procComm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// onlyChild is pid's one child, 0 if it has none or several.
func onlyChild(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	f := strings.Fields(string(b))
	if len(f) != 1 {
		return 0
	}
	n, _ := strconv.Atoi(f[0])
	return n
}

// neededCaps is the capability set gpuprof needs, as setpriv names them
// (docs/safety.md).
var neededCaps = []string{"bpf", "perfmon", "sys_ptrace", "dac_read_search"}

// asUserWith runs gpuprof as uid 65534 with exactly caps (bounding,
// inheritable and ambient sets: no more can be gained), from a copy of
// the binary that user can run.
func asUserWith(t *testing.T, bin string, caps []string, args ...string) *exec.Cmd {
	set := "-all"
	for _, c := range caps {
		set += ",+" + c
	}
	return exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups",
		"--inh-caps=" + set, "--ambient-caps=" + set, "--bounding-set=" + set, bin}, args...)...)
}

// sharedBinary copies gpuprof where uid 65534 can run it and write next
// to it.
func sharedBinary(t *testing.T) (bin, dir string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "gpuprof-caps")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	b, err := os.ReadFile(gpuprofBin)
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(dir, "gpuprof")
	if err := errorsOf(os.WriteFile(bin, b, 0o755), os.Chmod(dir, 0o777)); err != nil {
		t.Fatal(err)
	}
	return bin, dir
}

// TestCapabilities: a non-root user with exactly the capabilities
// gpuprof needs attaches to the demo and finds its steps (held to its own
// log); with each of them dropped in turn, gpuprof says which one it
// lacks in one line. --probe-stats needs CAP_SYS_ADMIN besides; a job
// started by gpuprof run gets none of gpuprof's capabilities.
func TestCapabilities(t *testing.T) {
	testenv.RequireRoot(t)
	needTools(t, "setpriv")
	bin, dir := sharedBinary(t)
	// The demo is root's: --allow-other-user, as a non-root user with
	// the capabilities attaching to a job started by root or a launcher.
	demo := testenv.StartDemo(t, "--steps", "300", "--start-delay", "0.5")
	steps := filepath.Join(dir, "steps.jsonl")
	r := runCommand(t, asUserWith(t, bin, neededCaps, "attach", "-q", "--allow-other-user", "--pid", itoa(demo.PID()), "--jsonl", steps))
	demoStepsMatch(t, demo, r, steps, fmt.Sprintf("attach with %v", neededCaps))

	sleep := startSleep(t)
	for _, c := range neededCaps {
		less := slices.DeleteFunc(slices.Clone(neededCaps), func(s string) bool { return s == c })
		r := runCommand(t, asUserWith(t, bin, less, "attach", "--allow-other-user", "--pid", itoa(sleep.Process.Pid), "-d", "1s"))
		oneLine(t, r, 1, "it lacks CAP_"+strings.ToUpper(c)+": run it with sudo")
	}
	r = runCommand(t, asUserWith(t, bin, neededCaps, "attach", "--allow-other-user", "--pid", itoa(sleep.Process.Pid), "-d", "1s", "--probe-stats"))
	oneLine(t, r, 1, "--probe-stats turns on the kernel's BPF statistics, which needs CAP_SYS_ADMIN")
	// CAP_SYS_ADMIN stands in for CAP_BPF and CAP_PERFMON (kernels before 5.8).
	r = runCommand(t, asUserWith(t, bin, []string{"sys_admin", "sys_ptrace", "dac_read_search"}, "attach", "--allow-other-user", "--pid", itoa(sleep.Process.Pid), "-d", "1s"))
	accepted(t, r, itoa(sleep.Process.Pid))

	// gpuprof run: the job runs with the user's own privileges.
	r = runCommand(t, asUserWith(t, bin, neededCaps, "run", "-q", "--", "grep", "^Cap", "/proc/self/status"))
	for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapAmb"} {
		if !strings.Contains(r.stdout, set+":\t0000000000000000") {
			t.Errorf("the job gpuprof run started has capabilities in %s:\n%s", set, r.stdout)
		}
	}
}

// TestListenersOnLoopback: every socket gpuprof listens on, with every
// server it has on (the metrics, here with the profile pushes too), is
// bound to 127.0.0.1 unless an address says otherwise: read from the
// kernel's socket table for gpuprof's own sockets while it runs.
func TestListenersOnLoopback(t *testing.T) {
	testenv.RequireRoot(t)
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	demo := testenv.StartDemo(t, "--steps", "300", "--start-delay", "0.3")
	for _, port := range []string{"0", freePort(t)} { // bare ports: 0 (any free one), and one
		cmd := exec.Command(gpuprofBin, "attach", "--pid", itoa(demo.PID()), "-d", "2s", "--metrics-addr", port, "--pyroscope", srv.URL)
		var errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = io.Discard, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var listening []string
		waitFor(t, func() bool {
			listening = listeningSockets(t, cmd.Process.Pid)
			return len(listening) > 0
		}, "gpuprof to listen (--metrics-addr %s)", port)
		cmd.Wait()
		for _, a := range listening {
			if !strings.HasPrefix(a, "127.0.0.1:") {
				t.Errorf("--metrics-addr %s: gpuprof listens on %s", port, a)
			}
		}
		if !strings.Contains(errb.String(), "serving metrics at http://127.0.0.1:") {
			t.Errorf("--metrics-addr %s: %s", port, errb.String())
		}
	}
}

// freePort is a TCP port nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	for p := 20000 + os.Getpid()%20000; p < 65000; p++ {
		if !slices.ContainsFunc(allListening(t), func(a string) bool { return strings.HasSuffix(a, ":"+strconv.Itoa(p)) }) {
			return strconv.Itoa(p)
		}
	}
	t.Fatal("no free port")
	return ""
}

// listeningSockets are the local addresses of pid's listening TCP
// sockets (IPv4 as 1.2.3.4:port, IPv6 as [hex]:port).
func listeningSockets(t *testing.T, pid int) []string {
	inodes := map[string]bool{}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		to, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if in, ok := strings.CutPrefix(to, "socket:["); ok {
			inodes[strings.TrimSuffix(in, "]")] = true
		}
	}
	var out []string
	for _, s := range tcpTable(t, pid) {
		if inodes[s.inode] {
			out = append(out, s.local)
		}
	}
	return out
}

func allListening(t *testing.T) []string {
	var out []string
	for _, s := range tcpTable(t, os.Getpid()) {
		out = append(out, s.local)
	}
	return out
}

type tcpSocket struct{ local, inode string }

// tcpTable reads the listening sockets of pid's network namespace
// (/proc/PID/net/tcp and tcp6).
func tcpTable(t *testing.T, pid int) []tcpSocket {
	var out []tcpSocket
	for _, name := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, name))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" { // TCP_LISTEN
				continue
			}
			out = append(out, tcpSocket{local: hexAddr(f[1]), inode: f[9]})
		}
	}
	return out
}

// hexAddr turns /proc/net/tcp's 0100007F:1F90 into 127.0.0.1:8080.
func hexAddr(s string) string {
	ip, port, _ := strings.Cut(s, ":")
	p, _ := strconv.ParseUint(port, 16, 16)
	if len(ip) != 8 {
		return "[" + ip + "]:" + strconv.FormatUint(p, 10)
	}
	var b [4]uint64
	for i := range b {
		b[i], _ = strconv.ParseUint(ip[2*i:2*i+2], 16, 8)
	}
	return fmt.Sprintf("%d.%d.%d.%d:%d", b[3], b[2], b[1], b[0], p)
}
