package main

import (
	"testing"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// TestAddWholeGets: attach's whole-gets probe comes after the user's, in
// the "get" role, marked as gpuprof's own; not twice when the user probes
// the same function.
func TestAddWholeGets(t *testing.T) {
	ups, roles, err := userProbes("pytorch", []string{"fetch=mooncake:mooncake::RealClient::get_into"})
	if err != nil {
		t.Fatal(err)
	}
	ups = addWholeGets(ups, roles)
	if len(ups) != 3 {
		t.Fatalf("%d probes, want the preset's, the user's and whole gets", len(ups))
	}
	last := ups[2]
	if last.Spec() != wholeGets || !last.Default || last.ID != cudaapi.UserBase+2 || roles[last.ID].Role != events.RoleGet {
		t.Errorf("whole gets %+v (role %q): want %s, gpuprof's own, after the user's", last, roles[last.ID].Role, wholeGets)
	}
	for _, u := range ups[:2] {
		if u.Default {
			t.Errorf("the user's %s marked as gpuprof's own", u.Spec())
		}
	}
	mine, roles, err := userProbes("", []string{"dispatch=py:multiprocessing.queues:Queue.get"})
	if err != nil {
		t.Fatal(err)
	}
	if got := addWholeGets(mine, roles); len(got) != 1 || got[0].Role != events.RoleDispatch {
		t.Errorf("the user probes Queue.get as dispatch; with whole gets added: %+v", got)
	}
}
