package pyroscope

import (
	"strings"
	"testing"
)

func TestSanitizeService(t *testing.T) {
	for in, want := range map[string]string{
		"train":           "train",
		"pkg.mod-v2_x":    "pkg.mod-v2_x",
		"my job/train.py": "my_job_train.py",
		"é{x}":            "__x_",
		"":                "",
	} {
		if got := SanitizeService(in); got != want {
			t.Errorf("SanitizeService(%q) = %q, want %q", in, got, want)
		}
		if in != "" {
			if err := checkService(SanitizeService(in)); err != nil {
				t.Errorf("sanitized %q is refused: %v", in, err)
			}
		}
	}
	if got := SanitizeService(strings.Repeat("a", 3000)); len(got) != maxLabelValue {
		t.Errorf("a 3000-byte service name is cut to %d bytes, want %d", len(got), maxLabelValue)
	}
}

func TestCheckLabel(t *testing.T) {
	good := [][2]string{{"cluster", "a100-east"}, {"team_2", "x=y"}, {"_x", "{odd"}, {"job", "ünïcode"}}
	for _, kv := range good {
		if err := CheckLabel(kv[0], kv[1]); err != nil {
			t.Errorf("CheckLabel(%q, %q): %v", kv[0], kv[1], err)
		}
	}
	bad := map[[2]string]string{
		{"", "v"}:                        "empty label name",
		{"2x", "v"}:                      "not starting with a digit",
		{"a-b", "v"}:                     "use letters",
		{"a.b", "v"}:                     "use letters",
		{"__name__", "v"}:                "server's own",
		{"service_name", "v"}:            "server's own",
		{"pyroscope_spy", "v"}:           "server's own",
		{"k", ""}:                        "empty value",
		{"k", "a,b"}:                     "may not hold",
		{"k", "a}"}:                      "may not hold",
		{"k", " a"}:                      "start or end with a space",
		{"k", "\xff"}:                    "not UTF-8",
		{"k", strings.Repeat("v", 2049)}: "up to 2048",
	}
	for kv, want := range bad {
		err := CheckLabel(kv[0], kv[1])
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckLabel(%q, %.10q) = %v, want an error saying %q", kv[0], kv[1], err, want)
		}
	}
}

func TestSanitizeLabelValue(t *testing.T) {
	for in, want := range map[string]string{
		"node-1":     "node-1",
		" a,b}c ":    "a_b_c",
		"x\xffy":     "x?y",
		"   ":        "",
		"k=v{inner}": "k=v{inner_",
	} {
		got := SanitizeLabelValue(in)
		if got != want {
			t.Errorf("SanitizeLabelValue(%q) = %q, want %q", in, got, want)
		}
		if got != "" {
			if err := CheckLabel("k", got); err != nil {
				t.Errorf("sanitized %q is refused: %v", in, err)
			}
		}
	}
}

func TestSeriesNameSorted(t *testing.T) {
	got := seriesName("train", map[string]string{"rank": "3", "host": "h1", "pid": "42", "gpu": "3"})
	if want := "train{gpu=3,host=h1,pid=42,rank=3}"; got != want {
		t.Errorf("seriesName = %q, want %q", got, want)
	}
	if got := seriesName("train", nil); got != "train{}" {
		t.Errorf("seriesName without labels = %q, want train{}", got)
	}
}
