package probes

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// FuzzParseUserProbe reads any --probe: a probe of a known role, a
// library and a symbol (a module and a qualname for py:), numbered by
// its position, whose Spec reads back as the same probe.
func FuzzParseUserProbe(f *testing.F) {
	for _, spec := range []string{"data=py:mod.sub:Loader.__next__", "fetch=mooncake/:mooncake::RealClient::batch_get_into",
		"get=ray/_raylet:::ray::CoreWorker::Get", "data=py::f", "warp=lib:f", "fetch"} {
		f.Add(spec, uint16(0))
	}
	f.Fuzz(func(t *testing.T, spec string, index uint16) {
		u, err := ParseUserProbe(spec, int(index))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("%q: error of more than one line: %v", spec, err)
			}
			return
		}
		if !slices.Contains(events.Roles(), u.Role) || u.Lib == "" || u.Symbol == "" || strings.Contains(u.Lib, ":") || u.ID != cudaapi.UserBase+index {
			t.Fatalf("%q (%d) read as %+v", spec, index, u)
		}
		if module, qualname, ok := u.Python(); ok != (u.Lib == "py") || ok && (module == "" || qualname == "") {
			t.Fatalf("%q read as %+v: Python %q %q %v", spec, u, module, qualname, ok)
		}
		again, err := ParseUserProbe(u.Spec(), int(index))
		if strings.HasPrefix(u.Symbol, "::") {
			return // "lib:::::f" loses one "::" a reading
		}
		if err != nil || again != u {
			t.Fatalf("%q read as %+v, its Spec %q as %+v (%v)", spec, u, u.Spec(), again, err)
		}
	})
}
