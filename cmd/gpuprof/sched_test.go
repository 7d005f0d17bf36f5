package main

import (
	"strings"
	"testing"

	"github.com/gpuprof/gpuprof/internal/testenv"
)

// TestRunsBehindTheJob: gpuprof's threads run under SCHED_BATCH, the job
// it starts keeps the normal policy, and --normal-sched leaves gpuprof's
// alone. The job prints its own /proc stat line and those of gpuprof's
// threads (its parent), a second in.
func TestRunsBehindTheJob(t *testing.T) {
	testenv.RequireRoot(t)
	const show = `sleep 1; cat /proc/$$/stat; echo; cat /proc/$PPID/task/*/stat`
	for _, c := range []struct {
		flags  []string
		policy string // gpuprof's threads'
	}{{nil, "3"}, {[]string{"--normal-sched"}, "0"}} {
		r := gpuprof(t, append(append([]string{"run", "-q"}, c.flags...), "--", "sh", "-c", show)...)
		if r.code != 0 {
			t.Fatalf("run %v: %+v", c.flags, r)
		}
		var lines []string // the stat lines; the summary follows them
		for _, l := range strings.Split(r.stdout, "\n") {
			if pid, _, ok := strings.Cut(l, " ("); ok && pid != "" && strings.Trim(pid, "0123456789") == "" {
				lines = append(lines, l)
			}
		}
		if len(lines) < 3 {
			t.Fatalf("run %v printed %q, want the job's stat line and gpuprof's threads'", c.flags, r.stdout)
		}
		// Field 41 of a stat line is the scheduling policy; fields after
		// the command name in parentheses start at 3.
		policy := func(line string) string {
			_, rest, _ := strings.Cut(line, ") ")
			f := strings.Fields(rest)
			if len(f) < 39 {
				t.Fatalf("short stat line %q", line)
			}
			return f[38]
		}
		if p := policy(lines[0]); p != "0" {
			t.Errorf("run %v: the job's policy %s, want SCHED_OTHER (0)", c.flags, p)
		}
		for _, l := range lines[1:] {
			if policy(l) != c.policy {
				t.Errorf("run %v: a gpuprof thread's policy %s, want %s: %s", c.flags, policy(l), c.policy, l)
			}
		}
	}
}
