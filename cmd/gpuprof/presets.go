package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/probes"
)

// presets bundle the --probe specs of a kind of job (docs/facts.md §4). Python
// waits (queue gets, DataLoader, sleeps) need no preset: they are timed in
// every CPython job.
var presets = map[string][]string{
	// AngelSpec: the trainer waits on a Ray queue (ray.get underneath) and
	// fetches samples from the Mooncake store.
	"angelspec": {
		"dispatch=_raylet:ray::core::CoreWorker::Get",
		"fetch=mooncake:mooncake::RealClient::batch_get_into",
		"fetch=mooncake:mooncake::RealClient::get_into",
		"fetch=mooncake:mooncake::RealClient::batch_get_buffer",
		"fetch=mooncake:mooncake::RealClient::get_buffer",
	},
	// A PyTorch loop: DataLoader and queue waits are timed without probes;
	// the time in the DataLoader's __next__ (waiting, unpickling, pinning)
	// with its Python function watched: two debug traps a batch.
	"pytorch": {dataLoaderNext},
	// SpecForge trains on a PyTorch DataLoader: as pytorch.
	"specforge": {dataLoaderNext},
}

// dataLoaderNext is every torch DataLoader iterator's __next__ (torch 2.x).
const dataLoaderNext = "data=py:torch.utils.data.dataloader:_BaseDataLoaderIter.__next__"

// wholeGets is the probe attach adds to time multiprocessing queues' gets
// whole (--whole-gets). A tensor got from such a queue is rebuilt from
// shared memory inside the get, after it blocked (on the H200 host 30% of
// a get, unseen as a wait). Watched in a process once it imports
// multiprocessing.queues; its debug registers go to a py: probe of the
// user's that needs them (probes.UserProbe.Default).
const wholeGets = "get=py:multiprocessing.queues:Queue.get"

// addWholeGets adds the whole-gets probe to the user's, unless they probe
// that function themselves.
func addWholeGets(ups []probes.UserProbe, roles map[uint16]correlate.UserProbe) []probes.UserProbe {
	u, err := probes.ParseUserProbe(wholeGets, len(ups))
	if err != nil {
		panic(err) // a constant
	}
	for _, o := range ups {
		if o.Lib == u.Lib && o.Symbol == u.Symbol {
			return ups
		}
	}
	u.Default = true
	roles[u.ID] = correlate.UserProbe{Role: u.Role, Name: u.Symbol}
	return append(ups, u)
}

func presetNames() string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// userProbes reads --preset and --probe into the probes to attach and what
// the correlator needs of them.
func userProbes(preset string, specs []string) ([]probes.UserProbe, map[uint16]correlate.UserProbe, error) {
	if preset != "" {
		p, ok := presets[preset]
		if !ok {
			return nil, nil, usageErr("--preset %q: one of %s", preset, presetNames())
		}
		specs = append(append([]string{}, p...), specs...)
	}
	var ups []probes.UserProbe
	roles := map[uint16]correlate.UserProbe{}
	for i, spec := range specs {
		u, err := probes.ParseUserProbe(spec, i)
		if err != nil {
			return nil, nil, usageErr("%v", err)
		}
		ups = append(ups, u)
		roles[u.ID] = correlate.UserProbe{Role: u.Role, Name: u.Symbol}
	}
	if len(ups) > 0 && ups[len(ups)-1].ID >= cudaapi.UserBase+0x7fff {
		return nil, nil, fmt.Errorf("too many --probe")
	}
	return ups, roles, nil
}
