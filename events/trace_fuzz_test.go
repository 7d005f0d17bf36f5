package events

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuprof/gpuprof/cudaapi"
)

// traceSeed is the header and the first lines of each kind of a recorded
// trace (testdata/traces), up to perKind of each.
func traceSeed(f *testing.F, path string, perKind int) []byte {
	file, err := os.Open(path)
	if err != nil {
		f.Fatal(err)
	}
	defer file.Close()
	gz, err := gzip.NewReader(file)
	if err != nil {
		f.Fatal(err)
	}
	sc := bufio.NewScanner(gz)
	sc.Buffer(nil, 1<<20)
	var out []byte
	seen := map[string]int{}
	for i := 0; sc.Scan(); i++ {
		var l struct {
			K string `json:"k"`
		}
		json.Unmarshal(sc.Bytes(), &l)
		if i > 0 && seen[l.K] >= perKind {
			continue
		}
		seen[l.K]++
		out = append(append(out, sc.Bytes()...), '\n')
	}
	return out
}

// A trace may come from anywhere: another gpuprof's, a file edited by
// hand, one cut short. FuzzReadTrace reads any: events of kinds and
// entry points this build knows, user probes the header names, and
// written again (TraceWriter) they read back the same.
func FuzzReadTrace(f *testing.F) {
	traces, _ := filepath.Glob(filepath.Join("..", "testdata", "traces", "*", "*.trace.jsonl.gz"))
	if len(traces) == 0 {
		f.Fatal("no traces in testdata/traces")
	}
	for _, path := range traces {
		f.Add(traceSeed(f, path, 2))
	}
	f.Add([]byte(`{"format":"gpuprof-trace/1","user_probes":["get=py:m:f"]}` + "\n" + `{"k":"call","api":"user:0","pid":1,"tid":1,"e":5,"a":[0,0,0,0,0]}` + "\n"))
	path := filepath.Join(f.TempDir(), "t.jsonl") // one a worker: its inputs run one at a time
	f.Fuzz(func(t *testing.T, data []byte) {
		h, evs, _, err := readTrace("fuzz", bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, e := range evs {
			if e.Kind.TraceName() == "" {
				t.Fatalf("event of kind %d", e.Kind)
			}
			if e.API >= cudaapi.UserBase {
				if int(e.API-cudaapi.UserBase) >= len(h.UserProbes) {
					t.Fatalf("event of user probe %d of %d", e.API-cudaapi.UserBase, len(h.UserProbes))
				}
			} else if _, ok := cudaapi.ByID(e.API); !ok && e.API != 0 {
				t.Fatalf("event of entry point %d", e.API)
			}
		}
		w, err := CreateTrace(path, h)
		if err != nil {
			t.Fatal(err)
		}
		for i := range evs {
			if err := w.Write(&evs[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		h2, evs2, unknown, err := ReadTrace(path)
		if err != nil || unknown != 0 {
			t.Fatalf("written again, %d unknown, %v", unknown, err)
		}
		// As JSON: a GPU field not read is NaN, equal to nothing.
		a, _ := json.Marshal([]any{h, evs})
		b, _ := json.Marshal([]any{h2, evs2})
		if !bytes.Equal(a, b) {
			t.Fatalf("written and read again:\n%s\nread first:\n%s", b, a)
		}
	})
}
