package correlate

import (
	"fmt"
	"strings"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// key groups calls that play the same part in a loop, whatever layer or
// variant they came through: all stream syncs, all host-to-device copies.
type key struct {
	class cudaapi.Class
	sync  cudaapi.SyncKind
	dir   cudaapi.Dir
	user  uint16 // a user probe's ID: only a configured boundary matches it
}

func keyOf(a cudaapi.API, e *events.Event) key {
	if e != nil && e.API >= cudaapi.UserBase {
		return key{user: e.API}
	}
	k := key{class: a.Class, sync: a.Sync}
	if a.Class == cudaapi.ClassCopy {
		if e != nil {
			k.dir = e.Dir()
		} else {
			k.dir = a.Dir
		}
	}
	return k
}

func (k key) String() string {
	if k.user != 0 {
		return "user probe"
	}
	switch k.class {
	case cudaapi.ClassSync:
		return k.sync.String() + " sync"
	case cudaapi.ClassCopy:
		return k.dir.String() + " copy"
	case cudaapi.ClassElapsed:
		return "event elapsed-time read"
	case cudaapi.ClassRecord:
		return "event record"
	}
	return k.class.String()
}

// priority ranks keys as step boundaries when several repeat once a step:
// the application reading its own step timing is the surest sign of a step's
// end, then a host sync (loss.item()), then an event record, then copies.
func (k key) priority() int {
	switch k.class {
	case cudaapi.ClassElapsed:
		return 4
	case cudaapi.ClassSync:
		return 3
	case cudaapi.ClassRecord:
		return 2
	case cudaapi.ClassCopy:
		if k.dir == cudaapi.DirDtoH {
			return 1
		}
		return 0
	}
	return -1
}

// canBeBoundary reports whether calls of this key may be found to mark step
// boundaries (a user probe marks them only when configured as the step).
func (k key) canBeBoundary() bool { return k.user == 0 && k.priority() >= 0 }

// less orders keys deterministically.
func (k key) less(o key) bool {
	if k.class != o.class {
		return k.class < o.class
	}
	if k.sync != o.sync {
		return k.sync < o.sync
	}
	if k.dir != o.dir {
		return k.dir < o.dir
	}
	return k.user < o.user
}

// matcher says which calls end a step: one key, or for copies named
// without a direction, every direction.
type matcher struct {
	key    key
	anyDir bool
	// cut: a step ends at the last such call before each fetch, however
	// many come between (cuts.go), not at each cluster of them.
	cut bool
}

func (m matcher) match(k key) bool {
	if m.anyDir {
		return k.class == m.key.class
	}
	return k == m.key
}

func (m matcher) String() string {
	if m.anyDir {
		return "copy"
	}
	return m.key.String()
}

// parseBoundary resolves a --step-boundary value, NAME or NAME:DIR for a
// copy (DIR one of h2d, d2h, d2d), to the calls it stands for.
func parseBoundary(spec string) (matcher, error) {
	name, dir, hasDir := strings.Cut(spec, ":")
	a, ok := cudaapi.ByName(name)
	if !ok {
		return matcher{}, fmt.Errorf("unknown step boundary %q: name a CUDA call such as cudaStreamSynchronize or cudaEventElapsedTime (gpuprof probes lists them)", spec)
	}
	k := keyOf(a, nil)
	if !k.canBeBoundary() {
		return matcher{}, fmt.Errorf("%s cannot mark a step boundary: launches and allocations are not reported one by one; name a sync, copy, event record or elapsed-time call", name)
	}
	if k.class != cudaapi.ClassCopy {
		if hasDir {
			return matcher{}, fmt.Errorf("step boundary %q: only copies take a direction", spec)
		}
		return matcher{key: k}, nil
	}
	if !hasDir {
		if a.KindArg == cudaapi.NoArg && a.Dir != cudaapi.DirUnknown {
			return matcher{key: k}, nil
		}
		return matcher{key: k, anyDir: true}, nil
	}
	for d := cudaapi.DirUnknown; d <= cudaapi.DirHtoH; d++ {
		if d.String() == dir {
			k.dir = d
			return matcher{key: k}, nil
		}
	}
	return matcher{}, fmt.Errorf("step boundary %q: direction must be h2d, d2h, d2d, h2h or default", spec)
}

// threadID keys per-thread state by process and thread.
func threadID(pid, tid uint32) uint64 { return uint64(pid)<<32 | uint64(tid) }
