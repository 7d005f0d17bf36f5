package pymem

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/internal/testenv"
)

// snapshot is one JSON line of testdata/python/pool_objects.py.
type snapshot struct {
	PID     int                   `json:"pid"`
	Minor   int                   `json:"minor"`
	Objects map[string][2]*uint64 `json:"objects"` // id, qsize or null
	// handle, maxvalue, kind of each multiprocessing queue's SemLock, and
	// the queue's pipe read end
	Semlocks map[string][4]uint64 `json:"semlocks"`
}

// script is a running testdata/python script.
type script struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr bytes.Buffer
}

// startScript runs pool_objects.py under python and returns its first
// snapshot; the process is killed when the test ends.
func startScript(t testing.TB, python string) (*script, snapshot) {
	t.Helper()
	s := runScript(t, python, "pool_objects.py")
	return s, s.next(t)
}

// runScript runs testdata/python/name under python; the process is
// killed when the test ends.
func runScript(t testing.TB, python, name string) *script {
	t.Helper()
	s := &script{name: name, lines: make(chan string, 4)}
	s.cmd = exec.Command(python, filepath.Join(testenv.Root(), "testdata", "python", name))
	s.cmd.Stderr = &s.stderr
	var err error
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	})
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	return s
}

// line decodes the script's next JSON line into v.
func (s *script) line(t testing.TB, v any) {
	t.Helper()
	select {
	case line, ok := <-s.lines:
		if !ok {
			s.cmd.Wait()
			t.Fatalf("%s exited: %s", s.name, s.stderr.String())
		}
		if err := json.Unmarshal([]byte(line), v); err != nil {
			t.Fatalf("%s printed %q: %v", s.name, line, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s printed nothing in 30s: %s", s.name, s.stderr.String())
	}
}

func (s *script) next(t testing.TB) snapshot {
	t.Helper()
	var snap snapshot
	s.line(t, &snap)
	return snap
}

// more has the script put one more item into every queue.
func (s *script) more(t testing.TB) snapshot {
	t.Helper()
	if _, err := io.WriteString(s.stdin, "more\n"); err != nil {
		t.Fatal(err)
	}
	return s.next(t)
}

// eachPython runs fn as a parallel subtest for each interpreter here, in
// name order.
func eachPython(t *testing.T, fn func(t *testing.T, python string)) {
	pythons := testenv.Pythons(t)
	for _, name := range sortedKeys(pythons) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, pythons[name])
		})
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestPools resolves every object pool_objects.py makes, in every
// interpreter, and holds Len to the queue's own qsize(), before and after
// one more item goes into each queue.
func TestPools(t *testing.T) {
	testenv.RequireRoot(t)
	eachPython(t, func(t *testing.T, python string) {
		s, snap := startScript(t, python)
		r, err := NewReader(snap.PID, snap.Minor)
		if err != nil {
			t.Fatal(err)
		}
		pools := map[string]*Pool{}
		for _, obj := range sortedKeys(snap.Objects) {
			id, qsize := *snap.Objects[obj][0], snap.Objects[obj][1]
			p, err := r.Pool(id)
			if qsize == nil {
				if err == nil || !errors.Is(err, ErrNotPool) || !strings.Contains(err.Error(), "NotAQueue") {
					t.Errorf("%s: Pool: %v, want an ErrNotPool naming NotAQueue", obj, err)
				} else {
					t.Logf("%s: %v", obj, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: Pool: %v", obj, err)
				continue
			}
			want := KindQueue
			if strings.HasPrefix(obj, "mp") {
				want = KindMPQueue
			}
			if p.Kind != want {
				t.Errorf("%s: Kind %q, want %q", obj, p.Kind, want)
			}
			if sl, ok := snap.Semlocks[obj]; ok && (p.addr != sl[0] || uint64(p.maxvalue) != sl[1] || sl[2] != semKindSemaphore) {
				t.Errorf("%s: SemLock read as handle %#x, maxvalue %d; it says handle %#x, maxvalue %d, kind %d",
					obj, p.addr, p.maxvalue, sl[0], sl[1], sl[2])
			}
			if fd, ok := p.ReadFD(); want == KindMPQueue && (!ok || uint64(fd) != snap.Semlocks[obj][3]) {
				t.Errorf("%s: read end fd %d (found %v), it says %d", obj, fd, ok, snap.Semlocks[obj][3])
			} else if want == KindQueue && ok {
				t.Errorf("%s: a queue.Queue with a read end fd %d", obj, fd)
			}
			pools[obj] = p
		}
		check := func(snap snapshot) {
			for _, obj := range sortedKeys(pools) {
				n, err := pools[obj].Len()
				if err != nil {
					t.Errorf("%s: Len: %v", obj, err)
				} else if want := *snap.Objects[obj][1]; uint64(n) != want {
					t.Errorf("%s (%s): Len %d, qsize %d", obj, pools[obj].Type, n, want)
				}
			}
		}
		// A deque's state counts its appends: one more put, one more.
		states := func() map[string]uint64 {
			out := map[string]uint64{}
			for obj, p := range pools {
				addr, ok := p.StateWord()
				if deque := p.Kind == KindQueue && p.Type != "LifoQueue" && p.Type != "PriorityQueue"; ok != deque {
					t.Errorf("%s (%s): StateWord ok %v, want %v (a deque counts, a list and a semaphore do not)", obj, p.Type, ok, deque)
				}
				if ok {
					b := make([]byte, 8)
					if err := r.read(addr, b); err != nil {
						t.Errorf("%s: read state: %v", obj, err)
					}
					out[obj] = le.Uint64(b)
				}
			}
			return out
		}
		check(snap)
		before := states()
		check(s.more(t))
		for obj, n := range states() {
			if n != before[obj]+1 {
				t.Errorf("%s: deque state %d after one put, was %d", obj, n, before[obj])
			}
		}

		attrs(t, r, snap)

		// Gone, the process reads as errors.
		s.cmd.Process.Kill()
		s.cmd.Wait()
		if n, err := pools["queue"].Len(); err == nil {
			t.Errorf("Len of an exited process: %d, no error", n)
		}
	})
}

// attrs checks TypeName and Attr on the script's objects.
func attrs(t *testing.T, r *Reader, snap snapshot) {
	t.Helper()
	id := func(obj string) uint64 { return *snap.Objects[obj][0] }
	for obj, want := range map[string]string{
		"queue": "Queue", "lifo": "LifoQueue", "priority": "PriorityQueue",
		"subclass": "TaggedQueue", "mp_joinable": "JoinableQueue", "not_a_queue": "NotAQueue",
	} {
		if got, err := r.TypeName(id(obj)); err != nil || got != want {
			t.Errorf("TypeName(%s) = %q, %v, want %q", obj, got, err, want)
		}
	}
	for _, c := range []struct{ obj, attr, typ string }{
		{"subclass", "tag", "str"},
		{"subclass", "queue", "collections.deque"},
		{"vars", "mutex", "_thread.lock"},
		{"dict_replaced", "maxsize", "int"},
		{"many_attrs", "extra_39", "int"},
		{"many_attrs", "not_full", "Condition"},
		{"not_a_queue", "queue", "list"},
		{"mp", "_sem", "BoundedSemaphore"},
	} {
		v, err := r.Attr(id(c.obj), c.attr)
		if err != nil {
			t.Errorf("Attr(%s, %s): %v", c.obj, c.attr, err)
			continue
		}
		if got, err := r.TypeName(v); err != nil || got != c.typ {
			t.Errorf("Attr(%s, %s) is a %q (%v), want %q", c.obj, c.attr, got, err, c.typ)
		}
	}
	if v, err := r.Attr(id("queue"), "no_such_attribute"); !errors.Is(err, errNoAttr) {
		t.Errorf("Attr(queue, no_such_attribute) = %#x, %v; want errNoAttr", v, err)
	}
	// "tag" is in the subclass's keys, not in plain Queue's.
	if v, err := r.Attr(id("queue"), "tag"); !errors.Is(err, errNoAttr) {
		t.Errorf("Attr(queue, tag) = %#x, %v; want errNoAttr", v, err)
	}
}

// TestBogus hands Pool addresses that hold no queue: each must give an
// error, never a panic, and nothing but the script's queues may resolve.
func TestBogus(t *testing.T) {
	testenv.RequireRoot(t)
	for _, minor := range []int{0, 9, 14, 314} {
		if _, err := NewReader(1, minor); err == nil {
			t.Errorf("NewReader(1, %d): no error", minor)
		}
	}
	if _, err := NewReader(0, 12); err == nil {
		t.Error("NewReader(0, 12): no error")
	}
	eachPython(t, func(t *testing.T, python string) {
		_, snap := startScript(t, python)
		r, err := NewReader(snap.PID, snap.Minor)
		if err != nil {
			t.Fatal(err)
		}
		queues := map[uint64]bool{}
		for _, v := range snap.Objects {
			if v[1] != nil {
				queues[*v[0]] = true
			}
		}
		for _, addr := range []uint64{0, 8, 0xfff, 0x1001, 0xdead_beef_0000, 1<<47 - 8, 1 << 56, ^uint64(0), ^uint64(0) - 7} {
			if p, err := r.Pool(addr); err == nil {
				t.Errorf("Pool(%#x) = %+v, no error", addr, p)
			}
			if _, err := r.TypeName(addr); err == nil {
				t.Errorf("TypeName(%#x): no error", addr)
			}
			if _, err := r.Attr(addr, "queue"); err == nil {
				t.Errorf("Attr(%#x): no error", addr)
			}
		}
		// Every word around the objects: mapped memory that mostly is
		// not an object's start.
		var tried, resolved int
		for _, v := range snap.Objects {
			for addr := *v[0] - 512; addr < *v[0]+512; addr += 8 {
				tried++
				p, err := r.Pool(addr)
				if err == nil {
					resolved++
					if !queues[addr] {
						t.Errorf("Pool(%#x) resolved a %s that is none of the script's queues", addr, p.Kind)
					}
				}
				r.Attr(addr, "queue")
			}
		}
		t.Logf("%d addresses, %d resolved (the queues among them)", tried, resolved)
		// Another process's addresses: no such process.
		gone, err := NewReader(1<<30, snap.Minor)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := gone.Pool(*snap.Objects["queue"][0]); err == nil {
			t.Error("Pool in a process that does not exist: no error")
		}
	})
}

// BenchmarkPoolLen is the cost of one reading of a live queue.
func BenchmarkPoolLen(b *testing.B) {
	testenv.RequireRoot(b)
	pythons := testenv.Pythons(b)
	for _, name := range sortedKeys(pythons) {
		_, snap := startScript(b, pythons[name])
		r, err := NewReader(snap.PID, snap.Minor)
		if err != nil {
			b.Fatal(err)
		}
		for _, obj := range []string{"queue", "mp"} {
			p, err := r.Pool(*snap.Objects[obj][0])
			if err != nil {
				b.Fatal(err)
			}
			b.Run(name+"/"+obj, func(b *testing.B) {
				for b.Loop() {
					if _, err := p.Len(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
