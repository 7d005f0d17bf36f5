package topview

import (
	"context"
	"fmt"
	"time"

	"github.com/gdamore/tcell/v2"

	"github.com/gpuprof/gpuprof/correlate"
)

// Redraw is how often the screen is drawn besides on resize: new steps
// come many times a second, and the header's clock ticks.
const Redraw = 250 * time.Millisecond

// Screen shows a Model on the terminal, in its alternate screen.
type Screen struct {
	s tcell.Screen
	m *Model
	// Before, where set, runs before each frame is drawn: for what the
	// model is told by asking (events lost, the processes attached to).
	Before func()
}

// Open takes the terminal (/dev/tty, as $TERM describes it) for m; an
// error says there is none to take.
func Open(m *Model) (*Screen, error) {
	s, err := tcell.NewScreen()
	if err != nil {
		return nil, fmt.Errorf("open terminal: %w", err)
	}
	return on(s, m)
}

// on shows m on s (a simulation screen in tests).
func on(s tcell.Screen, m *Model) (*Screen, error) {
	if err := s.Init(); err != nil {
		return nil, fmt.Errorf("open terminal: %w", err)
	}
	s.HideCursor()
	// Where the terminal's character set is ASCII (LANG=C), the units'
	// µ and the verdict's ≈ read as letters rather than as '?'.
	s.RegisterRuneFallback('µ', "u")
	s.RegisterRuneFallback('≈', "~")
	return &Screen{s: s, m: m}, nil
}

// Run draws the model until a quit key (q, Esc, Ctrl-C: the terminal is
// raw, so Ctrl-C is a key here, not a signal) or until ctx ends, and
// gives the terminal back as it was (its normal screen) either way,
// before it returns. quit says the user asked to.
func (s *Screen) Run(ctx context.Context) (quit bool) {
	defer func() {
		// Give the terminal back before a panic is printed, or it is
		// printed into the alternate screen and lost.
		r := recover()
		s.s.Fini()
		if r != nil {
			panic(r)
		}
	}()
	evs := make(chan tcell.Event, 16)
	stop := make(chan struct{})
	defer close(stop)
	go s.s.ChannelEvents(evs, stop)
	tick := time.NewTicker(Redraw)
	defer tick.Stop()
	s.draw()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
			s.draw()
		case ev, ok := <-evs:
			if !ok {
				return false
			}
			switch ev := ev.(type) {
			case *tcell.EventResize:
				s.s.Sync()
				s.draw()
			case *tcell.EventKey:
				if quitKey(ev) {
					return true
				}
				if ev.Key() == tcell.KeyCtrlL {
					s.s.Sync()
					s.draw()
				}
			}
		}
	}
}

func quitKey(ev *tcell.EventKey) bool {
	switch ev.Key() {
	case tcell.KeyEscape, tcell.KeyCtrlC:
		return true
	case tcell.KeyRune:
		return ev.Rune() == 'q' || ev.Rune() == 'Q'
	}
	return false
}

func (s *Screen) draw() {
	if s.Before != nil {
		s.Before()
	}
	w, h := s.s.Size()
	s.s.Clear()
	for y, l := range s.m.Render(w, h) {
		put(s.s, y, l)
	}
	s.s.Show()
}

// Styles by line kind; a bar's glyphs get their phase's colour.
var (
	kindStyle = map[Kind]tcell.Style{
		Header:  tcell.StyleDefault.Reverse(true),
		Title:   tcell.StyleDefault.Bold(true),
		Columns: tcell.StyleDefault.Underline(true),
		Alert:   tcell.StyleDefault.Bold(true).Foreground(tcell.ColorYellow),
	}
	phaseColour = map[rune]tcell.Color{
		Glyphs[correlate.PhaseDispatchWait]: tcell.ColorRed,
		Glyphs[correlate.PhaseData]:         tcell.ColorYellow,
		Glyphs[correlate.PhaseCompute]:      tcell.ColorGreen,
		Glyphs[correlate.PhaseSync]:         tcell.ColorBlue,
		Glyphs[correlate.PhaseOther]:        tcell.ColorGray,
	}
)

func put(s tcell.Screen, y int, l Line) {
	style := kindStyle[l.Kind]
	inBar := false
	x := 0
	for _, r := range l.Text {
		st := style
		switch {
		case l.Kind == Bar && r == '[':
			inBar = true
		case l.Kind == Bar && r == ']':
			inBar = false
		case inBar:
			if c, ok := phaseColour[r]; ok {
				st = tcell.StyleDefault.Background(c).Foreground(tcell.ColorBlack)
			}
		}
		s.SetContent(x, y, r, nil, st)
		x++
	}
	if l.Kind == Header {
		w, _ := s.Size()
		for ; x < w; x++ {
			s.SetContent(x, y, ' ', nil, style)
		}
	}
}
