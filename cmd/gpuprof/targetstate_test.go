package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/internal/testenv"
)

// What a detach must leave as it found it, read on the target alone (other
// gpuprof processes run on this machine at the same time, on targets of
// their own): its code as its files hold it, and no uprobe filtered to it.

// textMapping is one executable mapping of a file in a process.
type textMapping struct {
	start, end, offset uint64
	path               string
}

// textMappings reads pid's executable file mappings from its maps.
func textMappings(pid int) ([]textMapping, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []textMapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || !strings.Contains(fields[1], "x") || !strings.HasPrefix(fields[5], "/") {
			continue
		}
		lo, hi, _ := strings.Cut(fields[0], "-")
		m := textMapping{path: strings.Join(fields[5:], " ")}
		m.start, _ = strconv.ParseUint(lo, 16, 64)
		m.end, _ = strconv.ParseUint(hi, 16, 64)
		m.offset, _ = strconv.ParseUint(fields[2], 16, 64)
		out = append(out, m)
	}
	return out, sc.Err()
}

// textDiffs compares every byte of pid's executable file mappings, as the
// process sees them (/proc/PID/mem), with the files' bytes (through
// /proc/PID/map_files, which reaches a file deleted or in another mount
// namespace): a uprobe is an int3 written into the process's copy of the
// page, so one left behind is a difference. It returns one line for each
// mapping that differs.
func textDiffs(pid int) ([]string, error) {
	maps, err := textMappings(pid)
	if err != nil {
		return nil, err
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		return nil, err
	}
	defer mem.Close()
	var diffs []string
	for _, m := range maps {
		file, err := os.Open(fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.start, m.end))
		if err != nil {
			return nil, fmt.Errorf("open %s's mapping: %w", m.path, err)
		}
		want := make([]byte, m.end-m.start)
		n, err := file.ReadAt(want, int64(m.offset))
		file.Close()
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read %s: %w", m.path, err)
		}
		want = want[:n] // past the file's end the page holds zeros
		got := make([]byte, n)
		if _, err := mem.ReadAt(got, int64(m.start)); err != nil {
			return nil, fmt.Errorf("read PID %d's memory at %#x (%s): %w", pid, m.start, m.path, err)
		}
		if bytes.Equal(got, want) {
			continue
		}
		var at []string
		for i := range got {
			if got[i] != want[i] && len(at) < 4 {
				at = append(at, fmt.Sprintf("file offset %#x: %#02x, file %#02x", m.offset+uint64(i), got[i], want[i]))
			}
		}
		diffs = append(diffs, fmt.Sprintf("%s: %s", m.path, strings.Join(at, "; ")))
	}
	return diffs, nil
}

// uprobeLinksOn lists the uprobe_multi links anyone holds that fire only
// in pid, as "file: N probes".
func uprobeLinksOn(pid int) ([]string, error) {
	links, err := testenv.UprobeLinksOn(pid)
	var out []string
	for _, info := range links {
		um := info.UprobeMulti()
		out = append(out, fmt.Sprintf("link %d on %s: %d probes", info.ID, um.File, um.Count))
	}
	return out, err
}

// checkAsItWas fails t where pid's code differs from its files or a uprobe
// link on it remains.
func checkAsItWas(t *testing.T, pid int, when string) {
	t.Helper()
	diffs, err := textDiffs(pid)
	if err != nil {
		t.Fatalf("%s: read PID %d's code: %v", when, pid, err)
	}
	for _, d := range diffs {
		t.Errorf("%s: PID %d's code differs from its file (a probe left behind): %s", when, pid, d)
	}
	links, err := uprobeLinksOn(pid)
	if err != nil {
		t.Fatalf("%s: list BPF links: %v", when, err)
	}
	for _, l := range links {
		t.Errorf("%s: a uprobe on PID %d remains: %s", when, pid, l)
	}
}

// killCleanup bounds how long the kernel may take to take a SIGKILLed
// gpuprof's probes out of pid once gpuprof is reaped: its links are
// released as its files are (a dying process's last fput is deferred to
// a kernel worker), and a link leaves the kernel's list of links before
// its uprobes leave the target's code.
const killCleanup = 5 * time.Second

// checkAsItWasAfter is checkAsItWas once gpuprof has ended by sig: at
// once after SIGINT or SIGTERM, which gpuprof detaches by itself; after
// SIGKILL, once the kernel has let go of its links (within killCleanup),
// saying how long that took.
func checkAsItWasAfter(t *testing.T, pid int, sig syscall.Signal, when string) {
	t.Helper()
	if sig == syscall.SIGKILL {
		start := time.Now()
		for time.Since(start) < killCleanup {
			diffs, err := textDiffs(pid)
			links, lerr := uprobeLinksOn(pid)
			if err == nil && lerr == nil && len(diffs) == 0 && len(links) == 0 {
				t.Logf("%s: the kernel had taken the probes out %v after gpuprof was reaped", when, time.Since(start).Round(time.Millisecond))
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	checkAsItWas(t, pid, when)
}

// checkProbed fails t unless pid carries probes now, as the checks of
// checkAsItWas see them: so that their passing later means something.
func checkProbed(t *testing.T, pid int, when string) {
	t.Helper()
	diffs, err := textDiffs(pid)
	if err != nil {
		t.Fatalf("%s: read PID %d's code: %v", when, pid, err)
	}
	links, err := uprobeLinksOn(pid)
	if err != nil {
		t.Fatalf("%s: list BPF links: %v", when, err)
	}
	if len(diffs) == 0 || len(links) == 0 {
		t.Fatalf("%s: attached, yet %d mappings of PID %d differ from their files and %d uprobe links are on it: the checks see nothing", when, len(diffs), pid, len(links))
	}
}
