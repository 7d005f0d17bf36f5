package soak

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// sample is one row of soak.csv.
type sample struct {
	elapsedS float64
	rssKiB   uint64
}

// plotSVG draws RSS (MiB) against time (minutes): a plain polyline with
// its axes, for docs/img/soak.svg.
func plotSVG(w io.Writer, samples []sample, title string) {
	const width, height, left, bottom, top, right = 720, 320, 60, 40, 30, 20
	maxT, maxR := 1.0, 1.0
	for _, s := range samples {
		maxT = max(maxT, s.elapsedS/60)
		maxR = max(maxR, float64(s.rssKiB)/1024)
	}
	maxR = float64(int(maxR/100)+1) * 100 // the next 100 MiB up
	x := func(min float64) float64 { return left + min/maxT*(width-left-right) }
	y := func(mib float64) float64 { return height - bottom - mib/maxR*(height-bottom-top) }
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(w, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(w, `<text x="%d" y="18">%s</text>`+"\n", left, title)
	for r := 0.0; r <= maxR; r += 100 {
		fmt.Fprintf(w, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%.0f MiB</text>`+"\n",
			left, width-right, y(r), y(r), left-4, y(r)+4, r)
	}
	for m := 0.0; m <= maxT; m += 15 {
		fmt.Fprintf(w, `<text x="%.1f" y="%d" text-anchor="middle">%.0f min</text>`+"\n", x(m), height-bottom+16, m)
	}
	var pts []string
	for _, s := range samples {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(s.elapsedS/60), y(float64(s.rssKiB)/1024)))
	}
	fmt.Fprintf(w, `<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="%s"/>`+"\n", strings.Join(pts, " "))
	fmt.Fprintln(w, "</svg>")
}

// parseCSV reads soak.csv's rows (elapsed_s,rss_kib,produced).
func parseCSV(text string) ([]sample, error) {
	var out []sample
	for i, line := range slices.Collect(strings.SplitSeq(strings.TrimSpace(text), "\n")) {
		if i == 0 {
			continue // the header
		}
		var s sample
		var produced uint64
		if _, err := fmt.Sscanf(line, "%g,%d,%d", &s.elapsedS, &s.rssKiB, &produced); err != nil {
			return nil, fmt.Errorf("soak.csv line %d %q: %w", i+1, line, err)
		}
		out = append(out, s)
	}
	return out, nil
}
