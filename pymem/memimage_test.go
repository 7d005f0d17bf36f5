package pymem

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/internal/testenv"
)

// The fuzz tests read CPython objects from a memory image in place of a
// process: the image is segments, each an 8-byte address, a 2-byte length
// and that many bytes (the last one cut short where the input ends). The
// seeds are what Code, Pool and Function read of live interpreters
// (TestWriteFuzzSeeds), so the fuzzer starts from real objects and
// mutates their pointers, lengths and names.

const (
	imagePage     = 4096
	maxImagePages = 256 // 1 MB: an image's segments past it are left out
)

// memImage is an image's bytes by page; a byte of a page no segment
// touched is unmapped, one of a touched page that no segment gave is 0.
type memImage struct {
	pages map[uint64]*[imagePage]byte
	// largest is the longest read asked for: what the Reader allocated
	// for one read, the bound the fuzz tests hold it to.
	largest int
}

func parseImage(b []byte) *memImage {
	m := &memImage{pages: map[uint64]*[imagePage]byte{}}
	for len(b) >= 10 {
		addr, n := binary.LittleEndian.Uint64(b), int(binary.LittleEndian.Uint16(b[8:]))
		b = b[10:]
		data := b[:min(n, len(b))]
		b = b[len(data):]
		for i := 0; i < len(data); {
			a := addr + uint64(i)
			if a < addr {
				break // wrapped past 2^64
			}
			pg := m.pages[a/imagePage]
			if pg == nil {
				if len(m.pages) >= maxImagePages {
					break
				}
				pg = new([imagePage]byte)
				m.pages[a/imagePage] = pg
			}
			i += copy(pg[a%imagePage:], data[i:])
		}
	}
	return m
}

// read is process_vm_readv on the image: the bytes up to the first
// unmapped one, an error where there are none.
func (m *memImage) read(buf []byte, addr uint64) (int, error) {
	m.largest = max(m.largest, len(buf))
	got := 0
	for got < len(buf) {
		a := addr + uint64(got)
		pg := m.pages[a/imagePage]
		if pg == nil || a < addr {
			break
		}
		got += copy(buf[got:], pg[a%imagePage:])
	}
	if got == 0 {
		return 0, errors.New("bad address")
	}
	return got, nil
}

// imageReader is a Reader of CPython 3.minor whose memory is the image b;
// nil for a minor version pymem does not know.
func imageReader(b []byte, minor int) (*Reader, *memImage) {
	l, ok := layouts[minor]
	if !ok {
		return nil, nil
	}
	m := parseImage(b)
	return &Reader{pid: 1, minor: minor, l: l, mem: m.read, builtin: map[string]uint64{}, codes: map[uint64]*codeEntry{}}, m
}

// recorder keeps what a Reader read of a live process, as an image.
type recorder struct {
	read func(buf []byte, addr uint64) (int, error)
	segs map[uint64][]byte
}

func record(r *Reader) *recorder {
	rec := &recorder{read: r.mem, segs: map[uint64][]byte{}}
	r.mem = func(buf []byte, addr uint64) (int, error) {
		n, err := rec.read(buf, addr)
		if err == nil && n > len(rec.segs[addr]) {
			rec.segs[addr] = slices.Clone(buf[:n])
		}
		return n, err
	}
	return rec
}

func (rec *recorder) image() []byte {
	var out []byte
	for _, addr := range sortedAddrs(rec.segs) {
		data := rec.segs[addr]
		for len(data) > 0 {
			n := min(len(data), 0xffff)
			out = binary.LittleEndian.AppendUint64(out, addr)
			out = binary.LittleEndian.AppendUint16(out, uint16(n))
			out = append(out, data[:n]...)
			data, addr = data[n:], addr+uint64(n)
		}
	}
	return out
}

func sortedAddrs(m map[uint64][]byte) []uint64 {
	out := make([]uint64, 0, len(m))
	for a := range m {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

// writeSeed writes a corpus file of go test's fuzzing format: one value
// a line, Go syntax.
func writeSeed(t *testing.T, fuzzer, name string, values ...any) {
	t.Helper()
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, v := range values {
		switch v := v.(type) {
		case []byte:
			fmt.Fprintf(&b, "[]byte(%q)\n", v)
		case string:
			fmt.Fprintf(&b, "string(%q)\n", v)
		case int:
			fmt.Fprintf(&b, "int(%d)\n", v)
		case uint64:
			fmt.Fprintf(&b, "uint64(%d)\n", v)
		default:
			t.Fatalf("seed value of type %T", v)
		}
	}
	if b.Len() > 64<<10 {
		t.Logf("%s/%s: %d bytes, over 64 KB: not written", fuzzer, name, b.Len())
		return
	}
	dir := filepath.Join("testdata", "fuzz", fuzzer)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWriteFuzzSeeds records what Code, Pool and Function read of each
// interpreter here into testdata/fuzz, the fuzz tests' checked-in seeds.
// It runs only when asked (GPUPROF_WRITE_FUZZ_SEEDS=1): the seeds are
// committed.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("GPUPROF_WRITE_FUZZ_SEEDS") != "1" {
		t.Skip("writes the fuzz seeds: run with GPUPROF_WRITE_FUZZ_SEEDS=1")
	}
	testenv.RequireRoot(t)
	pythons := testenv.Pythons(t)
	for _, name := range sortedKeys(pythons) {
		if !strings.HasPrefix(name, "pyenv-") {
			continue // one of each version is enough
		}
		t.Run(name, func(t *testing.T) {
			python := pythons[name]
			_, r, out := startFunctions(t, python)
			for _, key := range []string{"__main__:Loader.fetch"} {
				module, qualname, _ := strings.Cut(key, ":")
				rec := record(r)
				f, err := r.Function(out.Runtime, module, qualname)
				r.mem = rec.read
				if err != nil {
					t.Fatalf("%s: %v", key, err)
				}
				writeSeed(t, "FuzzFunction", name+"-"+qualname, rec.image(), out.Minor, out.Runtime, module, qualname)
				// Afresh: the caches would answer some of Code's reads.
				r.builtin, r.codes = map[string]uint64{}, map[uint64]*codeEntry{}
				rec = record(r)
				if _, err := r.Code(f.Code, time.Now()); err != nil {
					t.Fatalf("%s: code: %v", key, err)
				}
				r.mem = rec.read
				writeSeed(t, "FuzzCode", name+"-"+qualname, rec.image(), out.Minor, f.Code)
			}
			_, snap := startScript(t, python)
			pr, err := NewReader(snap.PID, snap.Minor)
			if err != nil {
				t.Fatal(err)
			}
			for _, obj := range []string{"queue", "mp_bounded"} {
				id, ok := snap.Objects[obj]
				if !ok || id[0] == nil {
					t.Fatalf("pool_objects.py has no %s: %v", obj, snap.Objects)
				}
				rec := record(pr)
				_, err := pr.Pool(*id[0])
				pr.mem = rec.read
				if err != nil {
					t.Fatalf("%s: %v", obj, err)
				}
				writeSeed(t, "FuzzPool", name+"-"+obj, rec.image(), snap.Minor, *id[0])
				pr.builtin = map[string]uint64{} // afresh for the next
			}
		})
	}
}

// readSeed reads back a corpus file writeSeed wrote.
func readSeed(t *testing.T, path string) []any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var out []any
	for _, line := range lines[1:] {
		typ, v, _ := strings.Cut(strings.TrimSuffix(line, ")"), "(")
		var x any
		switch typ {
		case "[]byte", "string":
			s, err := strconv.Unquote(v)
			if err != nil {
				t.Fatalf("%s: %q: %v", path, line, err)
			}
			x = s
			if typ == "[]byte" {
				x = []byte(s)
			}
		case "int":
			x, err = strconv.Atoi(v)
		case "uint64":
			x, err = strconv.ParseUint(v, 10, 64)
		default:
			t.Fatalf("%s: %q", path, line)
		}
		if err != nil {
			t.Fatalf("%s: %q: %v", path, line, err)
		}
		out = append(out, x)
	}
	return out
}

// TestFuzzSeedsReplay: each checked-in seed image holds what its reader
// needs of the live interpreter it was recorded from, so that the fuzzer
// starts from objects pymem resolves, not from errors.
func TestFuzzSeedsReplay(t *testing.T) {
	seeds := func(fuzzer string) []string {
		files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", fuzzer, "pyenv-*"))
		if len(files) == 0 {
			t.Fatalf("no seeds in testdata/fuzz/%s", fuzzer)
		}
		return files
	}
	for _, path := range seeds("FuzzCode") {
		v := readSeed(t, path)
		r, _ := imageReader(v[0].([]byte), v[1].(int))
		if c, err := r.Code(v[2].(uint64), time.Now()); err != nil || !strings.HasSuffix(c.Func, "fetch") { // 3.10: co_name
			t.Errorf("%s: %+v, %v", path, c, err)
		}
	}
	for _, path := range seeds("FuzzPool") {
		v := readSeed(t, path)
		r, _ := imageReader(v[0].([]byte), v[1].(int))
		if p, err := r.Pool(v[2].(uint64)); err != nil {
			t.Errorf("%s: %v", path, err)
		} else if n, err := p.Len(); err != nil || n <= 0 {
			t.Errorf("%s: length %d, %v", path, n, err)
		}
	}
	for _, path := range seeds("FuzzFunction") {
		v := readSeed(t, path)
		r, _ := imageReader(v[0].([]byte), v[1].(int))
		if f, err := r.Function(v[2].(uint64), v[3].(string), v[4].(string)); err != nil || len(f.Returns) == 0 {
			t.Errorf("%s: %+v, %v", path, f, err)
		}
	}
}
