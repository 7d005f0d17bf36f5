package htmlreport

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWholeFileNamedOnlyWhole: while the page is written its directory
// holds no new name (so a kill leaves none), an abandoned page leaves the
// old one as it was, and a committed one replaces it, alone.
func TestWholeFileNamedOnlyWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "report.html")
	names := func() []string {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}
	for i, content := range []string{"first", "second"} {
		f, err := createWhole(path)
		if err != nil {
			t.Fatal(err)
		}
		if !f.unnamed {
			t.Logf("%s cannot hold unnamed files: a hidden temporary name instead", dir)
		} else if n := names(); len(n) != i {
			t.Errorf("while writing, the directory holds %q", n)
		}
		if _, err := f.WriteString(content); err != nil {
			t.Fatal(err)
		}
		if err := f.commit(); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != content {
			t.Errorf("after commit: %q, %v; want %q", b, err, content)
		}
		if n := names(); len(n) != 1 {
			t.Errorf("after commit the directory holds %q, want only report.html", n)
		}
	}
	f, err := createWhole(path)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("cut")
	f.abandon()
	if b, _ := os.ReadFile(path); string(b) != "second" {
		t.Errorf("after an abandoned write: %q, want the page before it", b)
	}
	if n := names(); len(n) != 1 {
		t.Errorf("after an abandoned write the directory holds %q", n)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, %v; want 0644", st.Mode(), err)
	}
}
