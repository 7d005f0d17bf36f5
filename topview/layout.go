package topview

import (
	"slices"
	"unicode/utf8"
)

// Kind says what a line shows, for the screen to style it; the text is
// the same whatever the style.
type Kind int

const (
	Text    Kind = iota
	Header       // the top line
	Title        // a section's title
	Columns      // a table's column names
	Alert        // the bottleneck
	Bar          // a phase bar: the glyphs between its brackets are phases (Glyphs)
)

// Line is one row of the screen.
type Line struct {
	Text string
	Kind Kind
}

// A block is a part of the screen that is shown whole or not at all,
// its head always and at least min lines of its body (the last ones:
// the newest steps and notes), more where there is room. On a short
// terminal the blocks of the highest keep go first.
type block struct {
	head []Line
	body []Line
	min  int
	keep int  // lower: kept longer on a short terminal
	sep  bool // a blank line before it, where there is room
}

// layout fits blocks, in their order, into width and height: blocks are
// taken by keep while they fit, then their bodies grow by keep, then
// blank lines go between sections while rows are left. Lines longer than
// the width are cut.
func layout(blocks []block, width, height int) []Line {
	if width <= 0 || height <= 0 {
		return nil
	}
	order := make([]int, len(blocks))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return blocks[a].keep - blocks[b].keep })
	shown := make([]int, len(blocks)) // body lines shown; -1: block left out
	used := 0
	for _, i := range order {
		b := &blocks[i]
		n := min(b.min, len(b.body))
		if used+len(b.head)+n > height {
			shown[i] = -1
			continue
		}
		shown[i], used = n, used+len(b.head)+n
	}
	for _, i := range order {
		if shown[i] >= 0 {
			more := min(len(blocks[i].body)-shown[i], height-used)
			shown[i] += more
			used += more
		}
	}
	var out []Line
	for i, b := range blocks {
		if shown[i] < 0 {
			continue
		}
		if b.sep && len(out) > 0 && used < height {
			out = append(out, Line{})
			used++
		}
		out = append(out, b.head...)
		out = append(out, b.body[len(b.body)-shown[i]:]...)
	}
	for i := range out {
		out[i].Text = cut(out[i].Text, width)
	}
	return out
}

// cut shortens s to width runes.
func cut(s string, width int) string {
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	n := 0
	for i := range s {
		if n == width {
			return s[:i]
		}
		n++
	}
	return s
}
