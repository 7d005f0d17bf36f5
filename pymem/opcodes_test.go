package pymem

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuprof/gpuprof/internal/testenv"
)

// opcodesPy prints each opcode the interpreter defines: its base
// instruction (itself unless specialised) and that one's inline caches.
const opcodesPy = `
import dis, json, opcode, sys
allmap = getattr(dis, "_all_opmap", opcode.opmap)
ice = getattr(opcode, "_inline_cache_entries", None)
deopt = {s: b for b, ss in getattr(opcode, "_specializations", {}).items() for s in ss}
def caches(base):
    if ice is None:
        return 0
    if isinstance(ice, dict):
        return ice.get(base, 0)
    return ice[allmap[base]]
out = {op: [deopt.get(n, n), caches(deopt.get(n, n))] for n, op in allmap.items() if op < 256}
print(sys.version_info.minor, json.dumps(out))
`

// wantKind is the kind the scan must give an opcode whose base
// instruction is base.
func wantKind(base string) opKind {
	switch {
	case base == "CACHE":
		return opCache
	case base == "RESUME":
		return opResume
	case base == "RETURN_VALUE" || base == "RETURN_CONST":
		return opReturn
	case base == "EXTENDED_ARG":
		return opExtendedArg
	case strings.HasPrefix(base, "INSTRUMENTED_"):
		return opInstrumented
	case base == "ENTER_EXECUTOR":
		return opExecutor
	}
	return opPlain
}

// TestOpcodes holds each version's opcode table to the live interpreter's
// opcode and dis modules: every opcode defined, none more, each with its
// base instruction's cache count and the kind the scan gives it.
func TestOpcodes(t *testing.T) {
	pythons := testenv.Pythons(t)
	for _, name := range sortedKeys(pythons) {
		out, err := exec.Command(pythons[name], "-c", opcodesPy).Output()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		m, js, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
		minor, _ := strconv.Atoi(m)
		var live map[string][2]any // opcode: [base, caches]
		if err := json.Unmarshal([]byte(js), &live); err != nil {
			t.Fatalf("%s printed %q: %v", name, out, err)
		}
		ops, ok := opTables[minor]
		if !ok {
			t.Errorf("%s: no opcode table for 3.%d", name, minor)
			continue
		}
		for op := range 256 {
			got := ops[op]
			l, defined := live[strconv.Itoa(op)]
			if !defined {
				if got.kind != opUndefined {
					t.Errorf("%s: opcode %d (%q) is not defined", name, op, got.base)
				}
				continue
			}
			base, caches := l[0].(string), uint8(l[1].(float64))
			if got.kind != wantKind(base) || got.caches != caches {
				t.Errorf("%s: opcode %d (base %s, %d caches): table has kind %d, %d caches", name, op, base, caches, got.kind, got.caches)
			}
			if got.base != "" && got.base != base && !(got.kind == opInstrumented && wantKind(base) == opInstrumented) {
				t.Errorf("%s: opcode %d is %s's, the table files it under %s", name, op, base, got.base)
			}
		}
	}
}

// TestScan decodes bytecode made by hand: what live interpreters rarely
// show (EXTENDED_ARG before RESUME, instrumented code, garbage).
func TestScan(t *testing.T) {
	const (
		resume311, resumeQuick311, return311, extArg311 = 151, 150, 83, 144
		loadGlobal311, binaryOp311, nop311              = 116, 122, 9
		instrumentedResume312, enterExecutor313         = 240, 70
	)
	for _, c := range []struct {
		name    string
		minor   int
		code    []byte
		entry   int
		returns []int
		err     string
	}{
		{"3.10 entry is offset 0", 10, []byte{nop311, 0, 83, 0}, 0, []int{2}, ""},
		{"caches skipped", 11, []byte{
			resumeQuick311, 0,
			loadGlobal311, 1, return311, 0, return311, 0, return311, 0, return311, 0, return311, 0, // 5 caches that look like returns
			binaryOp311, 0, return311, 0, // 1 cache
			return311, 0}, 0, []int{18}, ""},
		{"RESUME after EXTENDED_ARG is not oparg 0", 11, []byte{extArg311, 1, resume311, 0, resume311, 0, return311, 0}, 4, []int{6}, ""},
		{"RESUME with oparg 1 is a resumption", 11, []byte{resume311, 1, resume311, 0, return311, 0}, 2, []int{4}, ""},
		{"no RESUME", 11, []byte{nop311, 0, return311, 0}, 0, nil, "no RESUME"},
		{"CACHE as an instruction", 11, []byte{resume311, 0, 0, 0}, 0, nil, "CACHE where an instruction starts"},
		{"caches past the end", 11, []byte{resume311, 0, loadGlobal311, 0, 0, 0}, 0, nil, "past the bytecode's end"},
		{"undefined opcode", 11, []byte{resume311, 0, 255, 0}, 0, nil, "none of CPython 3.11's"},
		{"instrumented", 12, []byte{instrumentedResume312, 0, 83, 0}, 0, nil, "sys.monitoring"},
		{"tier 2", 13, []byte{149, 0, enterExecutor313, 0, 36, 0}, 0, nil, "ENTER_EXECUTOR"},
		{"no table", 9, []byte{9, 0}, 0, nil, "no opcode table"},
	} {
		entry, returns, err := scan(c.minor, c.code)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %d, %v, %v; want an error saying %q", c.name, entry, returns, err, c.err)
			}
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
		case entry != c.entry || !slices.Equal(returns, c.returns):
			t.Errorf("%s: entry %d, returns %v; want %d, %v", c.name, entry, returns, c.entry, c.returns)
		}
	}
}
