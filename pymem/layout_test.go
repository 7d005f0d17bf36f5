package pymem

import (
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuprof/gpuprof/internal/testenv"
)

// TestLayouts holds the layouts table to each interpreter's own headers,
// compiled with offsetof (testdata/python/objoffsets.c), and checks
// glibc's sem_t encoding that semValue assumes.
func TestLayouts(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		testenv.Skip(t, "needs gcc to compile testdata/python/objoffsets.c")
	}
	src := filepath.Join(testenv.Root(), "testdata", "python", "objoffsets.c")
	pythons := testenv.Pythons(t)
	for _, name := range sortedKeys(pythons) {
		python := pythons[name]
		out, err := exec.Command(python, "-c",
			"import sys, sysconfig; print(sys.version_info.minor, sysconfig.get_paths()['include'])").Output()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		m, include, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
		minor, _ := strconv.Atoi(m)
		want, ok := layouts[minor]
		if !ok {
			t.Errorf("%s: no layout for 3.%d", name, minor)
			continue
		}
		bin := filepath.Join(t.TempDir(), "objoffsets")
		if out, err := exec.Command("gcc", "-pthread", "-I"+include, "-o", bin, src).CombinedOutput(); err != nil {
			testenv.Skip(t, "%s: compile objoffsets.c against %s: %v\n%s", name, include, err, out)
		}
		out, err = exec.Command(bin).Output()
		if err != nil {
			t.Fatal(err)
		}
		v := reflect.ValueOf(*want)
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			field, val, _ := strings.Cut(line, " ")
			n, err := strconv.ParseUint(val, 10, 64)
			if err != nil {
				t.Fatalf("%s: objoffsets printed %q", name, line)
			}
			if field == "SemWordAfterWait" {
				if got := semValue(n); got != 6 {
					t.Errorf("%s: a sem_t at 7 taken once reads as %d (word %#x)", name, got, n)
				}
				continue
			}
			if got := v.FieldByName(field); !got.IsValid() || got.Uint() != n {
				t.Errorf("%s: %s is %d in the headers, %v in layouts[%d]", name, field, n, got, minor)
			}
		}
	}
}
