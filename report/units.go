package report

import (
	"fmt"
	"strconv"
	"strings"
)

// Duration formats seconds compactly: 18.6ms, 412µs, 2.31s.
func Duration(s float64) string {
	switch {
	case s >= 10:
		return fmt.Sprintf("%.1fs", s)
	case s >= 1:
		return fmt.Sprintf("%.2fs", s)
	case s >= 10e-3:
		return fmt.Sprintf("%.1fms", s*1e3)
	case s >= 1e-3:
		return fmt.Sprintf("%.2fms", s*1e3)
	case s >= 1e-6:
		return fmt.Sprintf("%.0fµs", s*1e6)
	case s > 0:
		return fmt.Sprintf("%.0fns", s*1e9)
	}
	return "0"
}

// Bytes formats a byte count with binary prefixes.
func Bytes(n float64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGiB", n/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", n/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", n/(1<<10))
	}
	return fmt.Sprintf("%.0fB", n)
}

// PIDList names processes, the first shown of them and how many more.
func PIDList(pids []int, shown int) string {
	parts := make([]string, 0, shown+1)
	for _, p := range pids[:min(len(pids), shown)] {
		parts = append(parts, strconv.Itoa(p))
	}
	if len(pids) > shown {
		parts = append(parts, fmt.Sprintf("and %d more", len(pids)-shown))
	}
	return "PID " + strings.Join(parts, ", ")
}
