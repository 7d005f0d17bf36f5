package validate

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A job's log is the job's: FuzzReadJSONL reads any, rows with an end
// and only numbers for fields, and the rows written back as a log read
// the same.
func FuzzReadJSONL(f *testing.F) {
	truths, _ := filepath.Glob(filepath.Join("..", "testdata", "traces", "*", "*.truth.jsonl.gz"))
	if len(truths) == 0 {
		f.Fatal("no truth logs in testdata/traces")
	}
	for _, path := range truths {
		file, err := os.Open(path)
		if err != nil {
			f.Fatal(err)
		}
		gz, err := gzip.NewReader(file)
		if err != nil {
			f.Fatal(err)
		}
		sc := bufio.NewScanner(gz)
		var seed []byte
		for i := 0; i < 5 && sc.Scan(); i++ {
			seed = append(append(seed, sc.Bytes()...), '\n')
		}
		file.Close()
		f.Add(seed)
	}
	f.Add([]byte(`{"step": 3, "t_end_ns": 1e9}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := readJSONL("fuzz", bytes.NewReader(data))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of more than one line: %v", err)
			}
			return
		}
		var back bytes.Buffer
		for _, r := range rows {
			if r.End == 0 {
				t.Fatalf("row %+v has no end", r)
			}
			m := map[string]any{"step": r.Step, "t_start_ns": r.Start, "t_end_ns": r.End}
			for k, v := range r.Fields {
				if k == "step" || k == "t_start_ns" || k == "t_end_ns" {
					t.Fatalf("row %+v keeps %s among its fields", r, k)
				}
				m[k] = v
			}
			line, err := json.Marshal(m)
			if err != nil {
				t.Fatalf("row %+v: %v", r, err)
			}
			back.Write(append(line, '\n'))
		}
		again, err := readJSONL("back", &back)
		if err != nil || len(again) != len(rows) {
			t.Fatalf("written back, read %d rows of %d: %v", len(again), len(rows), err)
		}
		for i := range rows {
			if again[i].Step != rows[i].Step || again[i].Start != rows[i].Start || again[i].End != rows[i].End ||
				!maps.Equal(again[i].Fields, rows[i].Fields) {
				t.Fatalf("row %d read back as %+v, was %+v", i, again[i], rows[i])
			}
		}
	})
}

// TestReadJSONLTimes: a time is a whole number of nanoseconds, or the
// log is refused, saying which line (fmt.Sscan read 1e9 as 1 ns).
func TestReadJSONLTimes(t *testing.T) {
	rows, err := readJSONL("log", strings.NewReader(`{"t_start_ns": 5, "t_end_ns": 1733000000000000123, "step": 2}`))
	if err != nil || len(rows) != 1 || rows[0].Start != 5 || rows[0].End != 1733000000000000123 || rows[0].Step != 2 {
		t.Fatalf("%+v, %v", rows, err)
	}
	for _, bad := range []string{"1e9", "1.5", "-3"} {
		_, err := readJSONL("log", strings.NewReader(`{"t_end_ns": `+bad+`}`))
		if err == nil || !strings.Contains(err.Error(), "log line 1: t_end_ns: "+bad+" is not a whole number") {
			t.Errorf("t_end_ns %s: %v", bad, err)
		}
	}
}
