package probes

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ianlancetaylor/demangle"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// UserProbe is one --probe: a native function, named by the library it is
// in and its symbol (mangled, or a C++ name such as
// mooncake::RealClient::batch_get_into, which matches every overload), or
// a Python function (Lib "py", Symbol MODULE:QUALNAME; pycall.go).
type UserProbe struct {
	ID     uint16 // cudaapi.UserBase + its position
	Role   events.Role
	Lib    string // matched against the path of each mapped file
	Symbol string
	// Default marks a probe gpuprof adds itself (attach's whole gets): it
	// gives its debug registers up to a Python probe of the user's that
	// needs them, and not finding it is logged at debug level, not warned
	// of.
	Default bool
}

// Spec is the probe as the user wrote it.
func (u UserProbe) Spec() string { return fmt.Sprintf("%s=%s:%s", u.Role, u.Lib, u.Symbol) }

// ParseUserProbe reads ROLE=LIB:SYMBOL.
func ParseUserProbe(spec string, index int) (UserProbe, error) {
	role, rest, ok := strings.Cut(spec, "=")
	lib, sym, ok2 := strings.Cut(rest, ":")
	// A C++ name leading with a '::' or with parameters would never match
	// a demangled name without them.
	if lib != "py" {
		sym = strings.TrimPrefix(sym, "::")
	}
	if !ok || !ok2 || lib == "" || sym == "" {
		return UserProbe{}, fmt.Errorf("--probe %q: write ROLE=LIB:SYMBOL, e.g. fetch=mooncake/store:mooncake::RealClient::batch_get_into", spec)
	}
	if module, qualname, ok := strings.Cut(sym, ":"); lib == "py" && (!ok || module == "" || qualname == "") {
		return UserProbe{}, fmt.Errorf("--probe %q: write ROLE=py:MODULE:QUALNAME, e.g. data=py:__main__:Loader.next_batch", spec)
	}
	if !slices.Contains(events.Roles(), events.Role(role)) {
		return UserProbe{}, fmt.Errorf("--probe %q: role must be one of %v", spec, events.Roles())
	}
	if index >= 0x7fff {
		return UserProbe{}, fmt.Errorf("--probe %q: too many probes", spec)
	}
	return UserProbe{ID: cudaapi.UserBase + uint16(index), Role: events.Role(role), Lib: lib, Symbol: sym}, nil
}

// matches says whether a file holds this probe's function.
func (u UserProbe) matchesFile(f MappedFile) bool {
	_, _, py := u.Python()
	return !py && strings.Contains(f.Path, u.Lib)
}

// Python is the module and qualified name of a Python function's probe
// (py:MODULE:QUALNAME); ok is false for a native function.
func (u UserProbe) Python() (module, qualname string, ok bool) {
	if u.Lib != "py" {
		return "", "", false
	}
	return strings.Cut(u.Symbol, ":")
}

// matchesSymbol compares a symbol with the probe's name: equal as written
// (mangled or C), or equal once demangled with parameters left out.
func (u UserProbe) matchesSymbol(name string) bool {
	if name == u.Symbol {
		return true
	}
	// Compiler-made parts and clones (name.cold, name.isra.0) are not the
	// function's entry: a return probe there would take the wrong return
	// address. Demangled they keep a "[clone ...]" suffix and never match.
	if !strings.HasPrefix(name, "_Z") || strings.Contains(name, ".") {
		return false
	}
	d, err := demangle.ToString(name, demangle.NoParams, demangle.NoTemplateParams)
	return err == nil && d == u.Symbol
}

// PlanUserProbes finds the user probes' functions in a mapped file.
func PlanUserProbes(f MappedFile, ups []UserProbe) ([]Probe, error) {
	var mine []UserProbe
	for _, u := range ups {
		if u.matchesFile(f) {
			mine = append(mine, u)
		}
	}
	if len(mine) == 0 {
		return nil, nil
	}
	owner := map[string]UserProbe{}
	syms, err := ReadSymbols(f.HostPath, func(name string) bool {
		for _, u := range mine {
			if u.matchesSymbol(name) {
				owner[name] = u
				return true
			}
		}
		return false
	})
	if err != nil {
		return nil, err
	}
	var out []Probe
	for name, s := range syms {
		u := owner[name]
		a := cudaapi.API{ID: u.ID, Name: u.Spec(), Layer: cudaapi.LayerUser,
			KindArg: cudaapi.NoArg, BytesArg: cudaapi.NoArg, HandleArg: cudaapi.NoArg, SecondArg: cudaapi.NoArg,
			StreamArg: cudaapi.NoArg, FuncArg: cudaapi.NoArg, NameArg: cudaapi.NoArg, OutArg: cudaapi.NoArg}
		out = append(out, Probe{API: a, Symbol: s, Placement: Place(s.Code)})
	}
	return out, nil
}
