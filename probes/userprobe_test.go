package probes

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/internal/testenv"
)

func TestParseUserProbe(t *testing.T) {
	py, err := ParseUserProbe("data=py:mod.sub:Loader.__next__", 0)
	if module, qualname, ok := py.Python(); err != nil || !ok || module != "mod.sub" || qualname != "Loader.__next__" {
		t.Fatalf("py probe: %+v %v", py, err)
	}
	if py.matchesFile(MappedFile{Path: "/usr/lib/libpython3.12.so"}) {
		t.Error("a Python function's probe matched a library")
	}
	u, err := ParseUserProbe("fetch=mooncake/:mooncake::RealClient::batch_get_into", 2)
	if err != nil || u.Role != events.RoleFetch || u.Lib != "mooncake/" || u.Symbol != "mooncake::RealClient::batch_get_into" || u.ID != 0x8002 {
		t.Fatalf("%+v %v", u, err)
	}
	for spec, want := range map[string]string{
		"fetch":       "ROLE=LIB:SYMBOL",
		"fetch=lib":   "ROLE=LIB:SYMBOL",
		"warp=lib:f":  "role must be one of",
		"data=py:mod": "ROLE=py:MODULE:QUALNAME",
		"data=py::f":  "ROLE=py:MODULE:QUALNAME",
	} {
		if _, err := ParseUserProbe(spec, 0); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", spec, err, want)
		}
	}
}

// TestUserProbesFindRealManglings plans the angelspec functions in the C++
// stand-ins, whose symbols carry Mooncake's and Ray's real manglings.
func TestUserProbesFindRealManglings(t *testing.T) {
	dir := filepath.Join(testenv.Fixtures(t), "native")
	for lib, name := range map[string]string{
		"mooncake/store.so": "mooncake::RealClient::batch_get_into",
		"ray/_raylet.so":    "ray::core::CoreWorker::Get",
	} {
		u, _ := ParseUserProbe("fetch="+filepath.Dir(lib)+":"+name, 0)
		f := MappedFile{Path: "/site-packages/" + lib, HostPath: filepath.Join(dir, lib)}
		ps, err := PlanUserProbes(f, []UserProbe{u})
		if err != nil || len(ps) != 1 || !strings.HasPrefix(ps[0].Symbol.Name, "_Z") {
			t.Fatalf("%s: %+v %v", name, ps, err)
		}
		if !ps[0].Placement.Emulated {
			t.Errorf("%s: placement %v", name, ps[0].Placement)
		}
	}
}
