package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuprof/gpuprof/internal/testenv"
)

// jobState is a shell script that writes what a process inherits from
// the one that started it to the file $1: signals blocked and ignored,
// CPUs and memory nodes allowed, capabilities, no_new_privs, seccomp,
// transparent huge pages, speculation controls, its tracer, resource
// limits, personality (address randomisation), timer slack, OOM score,
// umask, nice, scheduling policy and priority, the kinds of its open
// files, and its environment's names.
// Everything here survives exec, so a job gpuprof run starts carries it
// all its life.
const jobState = `s=/proc/$$ out=$1
{
grep -E '^(SigBlk|SigIgn|Cpus_allowed_list|Mems_allowed_list|NoNewPrivs|Seccomp|Seccomp_filters|THP_enabled|CapInh|CapPrm|CapEff|CapBnd|CapAmb|TracerPid|Speculation_Store_Bypass|SpeculationIndirectBranch):' $s/status
cat $s/limits
echo "personality $(cat $s/personality)"
echo "timerslack_ns $(cat $s/timerslack_ns)"
echo "oom_score_adj $(cat $s/oom_score_adj)"
echo "umask $(umask)"
set -- $(sed 's/.*) //' $s/stat)
echo "nice ${17} rt_priority ${38} policy ${39}"
for f in $s/fd/*; do l=$(readlink $f | sed 's/:\[[0-9]*\]$//'); [ "$l" = "$out" ] && l=this-file; echo "fd ${f##*/} $l"; done
env | sed 's/=.*//' | grep -vxE 'PWD|OLDPWD|SHLVL|_' | sort | sed 's/^/env /'
} >"$out"
`

// TestRunJobStartsAsBare: a job gpuprof run starts inherits nothing of
// gpuprof's own state (its scheduling policy, the Go runtime's raised
// file limit, a signal it ignores or blocks, a descriptor it holds, the
// capabilities it was given to trace): the job's process state is the
// one the same command gets started bare, in every field that survives
// exec. A job slower under gpuprof run than bare (docs/benchmark.md's
// data pipeline, 2026-12-03) is then not one started differently.
func TestRunJobStartsAsBare(t *testing.T) {
	testenv.RequireRoot(t)
	dir := t.TempDir()
	state := func(name string, argv ...string) string {
		t.Helper()
		file := filepath.Join(dir, name)
		cmd := exec.Command(argv[0], append(argv[1:], "sh", "-c", jobState, "sh", file)...)
		if r := runCommand(t, cmd); r.code != 0 {
			t.Fatalf("%s: %+v", name, r)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	bare := state("bare", "env")
	run := state("run", gpuprofBin, "run", "-q", "--")
	// The script must have read what it compares: an empty or partial
	// file would compare equal to another.
	for _, want := range []string{"SigIgn:", "Cpus_allowed_list:", "CapEff:", "Max open files", "policy 0", "personality ", "fd 0 ", "env PATH"} {
		if !strings.Contains(bare, want) {
			t.Fatalf("the bare job's state lacks %q:\n%s", want, bare)
		}
	}
	b, r := strings.Split(bare, "\n"), strings.Split(run, "\n")
	for i := range max(len(b), len(r)) {
		var bl, rl string
		if i < len(b) {
			bl = b[i]
		}
		if i < len(r) {
			rl = r[i]
		}
		if bl != rl {
			t.Errorf("under gpuprof run the job has %q, started bare %q", rl, bl)
		}
	}
}
