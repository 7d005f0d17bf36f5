package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/internal/testenv"
)

// TestKernelNamesAttachedMidRun: attached after the demo trainer had
// registered and launched its kernels, gpuprof never sees their
// registration; it names each by its first launch's call site: the host
// stubs' symbols (__device_stub__elementwise_kernel, and a compiler's
// clone of one, .constprop.0) for the runtime's launches, the calling
// function for the driver-API gemm whose module was loaded before.
func TestKernelNamesAttachedMidRun(t *testing.T) {
	testenv.RequireRoot(t)
	demo := testenv.StartDemo(t, "--steps", "100000")
	// Well past the start: 20 steps logged, every kernel launched.
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(demo.Truth)
		if strings.Count(string(b), "\n") >= 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo logged %d steps in 30 s", strings.Count(string(b), "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	r := gpuprof(t, "attach", "--pid", itoa(demo.PID()), "-d", "3s", "--launch-duty", "1", "-q")
	if r.code != 0 {
		t.Fatalf("attach: %+v", r)
	}
	_, kernels, _ := strings.Cut(r.stdout, "most launched kernels:\n")
	if kernels == "" {
		t.Fatalf("no kernels in the summary:\n%s", r.stdout)
	}
	lines := strings.Split(kernels, "\n")
	named := map[string]bool{}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 2 || strings.Trim(f[0], "0123456789") != "" {
			break
		}
		name := strings.Join(f[1:], " ")
		if strings.HasPrefix(name, "kernel 0x") && strings.HasSuffix(name, " launched by demo-trainer in launch_kernels (driver API)") {
			name = "the gemm, by its caller" // its handle: an address
		}
		named[name] = true
	}
	for _, want := range []string{"elementwise_kernel", "layernorm_kernel", "softmax_kernel", "engine_kernel", "the gemm, by its caller"} {
		if !named[want] {
			t.Errorf("kernel %q not named; the summary's kernels:\n%s", want, kernels)
		}
	}
	if strings.Contains(r.stdout, "kernels with no name") {
		t.Errorf("some launches' kernels stayed unnamed:\n%s", kernels)
	}
}
