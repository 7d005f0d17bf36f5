package bpf

import (
	"testing"

	"github.com/cilium/ebpf"

	"github.com/gpuprof/gpuprof/internal/testenv"
)

// A program of a feature the session does not use is loaded as the two
// instructions that return at once; with the feature, as it is.
func TestFeaturesLeftOut(t *testing.T) {
	testenv.RequireRoot(t)
	for _, use := range []Features{0, FeaturePyWaits, AllFeatures} {
		objs, err := Load(Settings{Features: use, WakeupBytes: 1 << 20})
		if err != nil {
			t.Fatalf("features %b: %v", use, err)
		}
		progs := map[string]*ebpf.Program{
			gpuprofProgPyLockReturn: objs.PyLockReturn, gpuprofProgPyCallSite: objs.PyCallSite,
			gpuprofProgCpuSample: objs.CpuSample, gpuprofProgOffcpuReturn: objs.OffcpuReturn,
			gpuprofProgApiReturn: objs.ApiReturn, gpuprofProgLaunchEntry: objs.LaunchEntry,
		}
		for name, p := range progs {
			info, err := p.Info()
			if err != nil {
				t.Fatal(err)
			}
			n, ok := info.VerifiedInstructions()
			if !ok {
				t.Skipf("the kernel does not say how many instructions it verified (%s)", name)
			}
			f, sampled := programFeature[name]
			if stub := sampled && use&f == 0; stub != (n == 2) {
				t.Errorf("features %b: %s verified %d instructions, want the stub's 2: %v", use, name, n, stub)
			}
		}
		objs.Close()
	}
}

// BenchmarkLoad loads the BPF programs as a session does at its start:
// with none of the features beyond the CUDA probes, with the Python wait
// probes (gpuprof attach's default), and with all (profiles, Python
// functions timed). The kernel's verifying is most of it.
func BenchmarkLoad(b *testing.B) {
	testenv.RequireRoot(b)
	for _, c := range []struct {
		name string
		use  Features
	}{{"core", 0}, {"pywaits", FeaturePyWaits}, {"all", AllFeatures}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				objs, err := Load(Settings{Features: c.use, WakeupBytes: 1 << 20})
				if err != nil {
					b.Fatal(err)
				}
				objs.Close()
			}
		})
	}
}
