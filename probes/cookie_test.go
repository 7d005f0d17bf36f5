package probes

import (
	"testing"

	"github.com/gpuprof/gpuprof/bpf"
	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// cookieFields are the cookie's fields as the BPF programs read them
// (COOKIE_FIELD): name, shift, mask.
var cookieFields = []struct {
	name        string
	shift, mask uint64
}{
	{"api", bpf.CookieAPIShift, bpf.CookieAPIMask},
	{"layer", bpf.CookieLayerShift, bpf.CookieLayerMask},
	{"out", bpf.CookieOutShift, bpf.CookieOutMask},
	{"out arg", bpf.CookieOutArgShift, bpf.CookieOutArgMask},
	{"func arg", bpf.CookieFuncArgShift, bpf.CookieFuncArgMask},
	{"name arg", bpf.CookieNameArgShift, bpf.CookieNameArgMask},
	{"graph", bpf.CookieGraphShift, bpf.CookieGraphMask},
	{"twin", bpf.CookieTwinShift, bpf.CookieTwinMask},
	{"caller", bpf.CookieCallerShift, bpf.CookieCallerMask},
}

// cookieValue reads one field as COOKIE_FIELD does.
func cookieValue(c uint64, field string) uint64 {
	for _, f := range cookieFields {
		if f.name == field {
			return c >> f.shift & f.mask
		}
	}
	panic(field)
}

// TestCookieLayout: no two fields share a bit, and all fit in 64.
func TestCookieLayout(t *testing.T) {
	var used uint64
	for _, f := range cookieFields {
		bits := f.mask << f.shift
		if bits>>f.shift != f.mask {
			t.Errorf("cookie field %s runs past bit 63", f.name)
		}
		if used&bits != 0 {
			t.Errorf("cookie field %s overlaps another: %#x, %#x taken", f.name, bits, used)
		}
		used |= bits
	}
	if bpf.CookieNoArg < uint64(len(events.Event{}.Args)) {
		t.Errorf("COOKIE_NO_ARG %d names an argument (%d are read)", bpf.CookieNoArg, len(events.Event{}.Args))
	}
}

// TestCookieConstants: the layers and output kinds the programs compare a
// cookie's fields with are cudaapi's.
func TestCookieConstants(t *testing.T) {
	for _, c := range []struct {
		name      string
		inC, inGo uint64
	}{
		{"LAYER_RUNTIME", bpf.LayerRuntime, uint64(cudaapi.LayerRuntime)},
		{"LAYER_DRIVER", bpf.LayerDriver, uint64(cudaapi.LayerDriver)},
		{"LAYER_USER", bpf.LayerUser, uint64(cudaapi.LayerUser)},
		{"OUT_U32", bpf.OutU32, uint64(cudaapi.OutU32)},
		{"OUT_U64", bpf.OutU64, uint64(cudaapi.OutU64)},
	} {
		if c.inC != c.inGo {
			t.Errorf("%s is %d in gpuprof.bpf.c, %d in cudaapi", c.name, c.inC, c.inGo)
		}
	}
}

// TestCookieFieldsFit: every entry point's cookie reads back, field by
// field, as what was packed (no value is cut by its field's width).
func TestCookieFieldsFit(t *testing.T) {
	user := cudaapi.API{ID: cudaapi.UserBase + 0x7ffe, Layer: cudaapi.LayerUser, FuncArg: cudaapi.NoArg,
		NameArg: cudaapi.NoArg, OutArg: cudaapi.NoArg}
	for _, a := range append(cudaapi.All(), user) {
		c := Probe{API: a}.Cookie()
		want := map[string]uint64{"api": uint64(a.ID), "layer": uint64(a.Layer), "out": uint64(a.Out),
			"out arg": cookieArg(a.OutArg), "twin": twinCode(a)}
		if a.FuncArg > 0 {
			want["func arg"] = uint64(a.FuncArg)
		}
		if a.NameArg != cudaapi.NoArg {
			want["name arg"] = uint64(a.NameArg + 1)
		}
		for field, v := range want {
			if got := cookieValue(c, field); got != v {
				t.Errorf("%s: cookie %#x has %s %d, want %d", a.Name, c, field, got, v)
			}
		}
		if a.OutArg != cudaapi.NoArg && cookieArg(a.OutArg) >= bpf.CookieNoArg {
			t.Errorf("%s: output argument %d reads as none", a.Name, a.OutArg)
		}
		if a.NameArg != cudaapi.NoArg && uint64(a.NameArg+1) >= bpf.CookieNoArg {
			t.Errorf("%s: name argument %d reads as none", a.Name, a.NameArg)
		}
	}
}

// TestCookieFlags: the one-bit fields, and the call sites' cookies.
func TestCookieFlags(t *testing.T) {
	for _, c := range []struct {
		name          string
		field         string
		want, without uint64
	}{
		{"cudaEventRecord", "caller", 1, 0},
		{"cuEventRecord", "caller", 0, 0},
		{"cuGraphLaunch", "graph", 1, 1},
		{"cuLaunchKernel", "graph", 0, 0},
		{"cuKernelGetFunction", "name arg", bpf.CookieNoArg, bpf.CookieNoArg},
	} {
		a, ok := cudaapi.ByName(c.name)
		if !ok {
			t.Fatalf("%s not in cudaapi", c.name)
		}
		ck := Probe{API: a}.Cookie()
		if got := cookieValue(ck, c.field); got != c.want {
			t.Errorf("%s: %s %d, want %d", c.name, c.field, got, c.want)
		}
		if got := cookieValue(withoutCaller(ck), c.field); got != c.without {
			t.Errorf("%s at a call site: %s %d, want %d", c.name, c.field, got, c.without)
		}
		if (ck^withoutCaller(ck))&^(bpf.CookieCallerMask<<bpf.CookieCallerShift) != 0 {
			t.Errorf("%s: withoutCaller changed more than the caller bit", c.name)
		}
	}
}
