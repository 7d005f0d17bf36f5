package topview

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// A table is laid out for a width: its columns are kept in the order of
// their keep rank while they fit, and shown in their own order, so a
// narrow terminal loses the least telling columns first, never a part of
// one.
type table struct {
	cols []column
	rows [][]string // a cell per column
}

type column struct {
	name string
	keep int  // lower: kept longer on a narrow terminal
	left bool // text, not a number: aligned left
}

// indent is the space before a table's first column, gap between columns.
const (
	indent = 2
	gap    = 2
)

// lines are the table's column names (first) and rows, in width.
func (t table) lines(width int) []string {
	widths := make([]int, len(t.cols))
	for i, c := range t.cols {
		widths[i] = utf8.RuneCountInString(c.name)
		for _, r := range t.rows {
			widths[i] = max(widths[i], utf8.RuneCountInString(r[i]))
		}
	}
	order := make([]int, len(t.cols))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return t.cols[a].keep - t.cols[b].keep })
	shown := make([]bool, len(t.cols))
	used := indent - gap
	for n, i := range order {
		w := used + gap + widths[i]
		if w > width && n > 0 {
			break // the next column in rank does not fit: none after it is shown either
		}
		shown[i], used = true, w
	}
	row := func(cells []string) string {
		var b strings.Builder
		b.WriteString(strings.Repeat(" ", indent-gap))
		for i, c := range cells {
			if !shown[i] {
				continue
			}
			b.WriteString(strings.Repeat(" ", gap))
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if t.cols[i].left {
				b.WriteString(c + pad)
			} else {
				b.WriteString(pad + c)
			}
		}
		return strings.TrimRight(b.String(), " ")
	}
	names := make([]string, len(t.cols))
	for i, c := range t.cols {
		names[i] = c.name
	}
	out := []string{row(names)}
	for _, r := range t.rows {
		out = append(out, row(r))
	}
	return out
}
