package perfetto

import (
	"hash/maphash"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
)

// maxFrames is how many Python frames a wait's stack arg names.
const maxFrames = 8

// maxWaitTexts bounds the waits' names and args kept for reuse; past it
// they are all let go of and made afresh.
const maxWaitTexts = 1024

// waitTexts keeps what Python waits are written with (their name and
// args, escaped) by what they depend on: a loop waits in the same few
// places over and over, and classifying a wait and escaping its stack
// cost more than the rest of its slice (BenchmarkWriter).
type waitTexts struct {
	seed  maphash.Seed
	h     maphash.Hash
	texts map[uint64][]byte
}

// key hashes what a wait's text depends on: what correlate.ClassifyWait
// reads (the libc function, whether a select had descriptors, the frames'
// functions and files) and the stack arg's frames.
func (c *waitTexts) key(e *events.Event) uint64 {
	if c.texts == nil {
		c.seed = maphash.MakeSeed()
		c.h.SetSeed(c.seed)
		c.texts = map[uint64][]byte{}
	}
	c.h.Reset()
	c.h.WriteString(e.Name)
	c.h.WriteByte(0)
	if e.Args[0] == 0 {
		c.h.WriteByte(1)
	}
	for _, f := range e.Frames {
		c.h.WriteString(f.Func)
		c.h.WriteByte(0)
		c.h.WriteString(f.File)
		c.h.WriteByte(0)
	}
	return c.h.Sum64()
}

// text is the wait's name and args as written: "wait KIND: WHAT", WHAT
// as the summary names it (correlate.DescribeWait), with the frames and
// the libc function it blocked in.
func (c *waitTexts) text(e *events.Event) []byte {
	k := c.key(e)
	if b, ok := c.texts[k]; ok {
		return b
	}
	if len(c.texts) >= maxWaitTexts {
		clear(c.texts)
	}
	b := append([]byte(nil), `,"name":"wait `...)
	kind, what := correlate.DescribeWait(e)
	b = append(b, kind.String()...)
	if what != "" {
		b = append(b, ": "...)
		b = appendEscaped(b, what)
	}
	b = append(b, `","args":{`...)
	if e.Name != "" {
		b = append(b, `"libc":`...)
		b = appendQuoted(b, e.Name)
	}
	if len(e.Frames) > 0 {
		if e.Name != "" {
			b = append(b, ',')
		}
		b = append(b, `"stack":"`...)
		for i, f := range e.Frames[:min(len(e.Frames), maxFrames)] {
			if i > 0 {
				b = append(b, " < "...)
			}
			b = appendEscaped(b, f.Func)
			b = append(b, " ("...)
			b = appendEscaped(b, fileBase(f.File))
			b = append(b, ')')
		}
		if len(e.Frames) > maxFrames {
			b = append(b, " < ..."...)
		}
		b = append(b, '"')
	}
	b = append(b, '}')
	c.texts[k] = b
	return b
}

// pyWait writes a Python wait on its thread.
func (w *Writer) pyWait(e *events.Event) {
	t := w.threadSlice(e.PID, e.TID, e.Start, e.End)
	if t == nil {
		return
	}
	w.ev.b = append(w.ev.b, w.waits.text(e)...)
	w.endSlice(t, e.Start, e.End)
}
