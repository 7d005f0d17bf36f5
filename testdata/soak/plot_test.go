package soak

import (
	"os"
	"strings"
	"testing"
)

// plotEnv names a soak.csv to draw as an SVG beside it (make soak does
// so after the soak: GPUPROF_SOAK_PLOT).
const plotEnv = "GPUPROF_SOAK_PLOT"

// TestPlot draws plotEnv's CSV, or a small one, and checks the drawing
// has a point a sample.
func TestPlot(t *testing.T) {
	csv := "elapsed_s,rss_kib,produced\n0,35000,0\n10,250000,400000\n20,260000,800000\n"
	path := os.Getenv(plotEnv)
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		csv = string(b)
	}
	samples, err := parseCSV(csv)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	plotSVG(&b, samples, "gpuprof RSS during the soak")
	if got := strings.Count(b.String()[strings.Index(b.String(), "<polyline"):], ","); got != len(samples) {
		t.Errorf("%d points drawn, want %d", got, len(samples))
	}
	if path != "" {
		if err := os.WriteFile(strings.TrimSuffix(path, ".csv")+".svg", []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
