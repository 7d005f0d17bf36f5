package correlate

import (
	"testing"

	"github.com/gpuprof/gpuprof/cudaapi"
)

// TestCallKind: an boundary says which calls end its steps as their class,
// a copy's direction, or copies of every direction.
func TestCallKind(t *testing.T) {
	for _, c := range []struct {
		m    matcher
		want CallKind
	}{
		{matcher{key: key{class: cudaapi.ClassCopy, dir: cudaapi.DirDtoD}}, CallKind{Class: cudaapi.ClassCopy, Dir: cudaapi.DirDtoD}},
		{matcher{key: key{class: cudaapi.ClassCopy, dir: cudaapi.DirHtoD}, anyDir: true}, CallKind{Class: cudaapi.ClassCopy, Dir: cudaapi.DirHtoD, AnyDir: true}},
		{matcher{key: key{class: cudaapi.ClassRecord}}, CallKind{Class: cudaapi.ClassRecord}},
		{matcher{key: key{class: cudaapi.ClassSync, sync: cudaapi.SyncStream}}, CallKind{Class: cudaapi.ClassSync}},
		{matcher{key: key{user: 1}}, CallKind{User: true}},
	} {
		if got := (Boundary{m: c.m}).CallKind(); got != c.want {
			t.Errorf("%v: %+v, want %+v", c.m, got, c.want)
		}
	}
}
