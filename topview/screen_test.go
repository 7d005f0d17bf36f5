package topview

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gdamore/tcell/v2"
)

// frame is a simulated screen's text, a string a row.
type frame struct {
	width int
	rows  []string
}

func (f frame) has(s string) bool { return strings.Contains(strings.Join(f.rows, "\n"), s) }

// simulated runs m on a simulation screen of width x height; frames has
// the screen as the frame before each draw showed it (read on the
// drawing goroutine, as the screen is not for reading from another).
func simulated(t *testing.T, m *Model, width, height int) (tcell.SimulationScreen, *Screen, <-chan frame) {
	t.Helper()
	sim := tcell.NewSimulationScreen("UTF-8")
	scr, err := on(sim, m)
	if err != nil {
		t.Fatal(err)
	}
	sim.SetSize(width, height)
	frames := make(chan frame, 1)
	scr.Before = func() {
		cells, w, h := sim.GetContents()
		f := frame{width: w}
		for y := range h {
			var b strings.Builder
			for x := range w {
				b.Write(cells[y*w+x].Bytes)
			}
			f.rows = append(f.rows, strings.TrimRight(b.String(), " "))
		}
		select {
		case <-frames: // only the latest is wanted
		default:
		}
		frames <- f
	}
	return sim, scr, frames
}

// waitFrame waits for a frame that ok accepts.
func waitFrame(t *testing.T, frames <-chan frame, what string, ok func(frame) bool) frame {
	t.Helper()
	deadline := time.After(10 * time.Second)
	var last frame
	for {
		select {
		case f := <-frames:
			if ok(f) {
				return f
			}
			last = f
		case <-deadline:
			t.Fatalf("no frame with %s in 10 s; the last:\n%s", what, strings.Join(last.rows, "\n"))
		}
	}
}

func TestScreenDrawsResizesAndQuits(t *testing.T) {
	m := demoLike()
	sim, scr, frames := simulated(t, m, 120, 40)
	quit := make(chan bool, 1)
	go func() { quit <- scr.Run(context.Background()) }()
	waitFrame(t, frames, "the wide layout", func(f frame) bool {
		return f.width == 120 && strings.HasPrefix(f.rows[0], "gpuprof top  PID 4242") && f.has("launches") && f.has("[DDD")
	})
	// New steps show within a redraw or two.
	trainer(m, 4242, nil, 1, 400*ms, 6*ms)
	waitFrame(t, frames, "31 steps", func(f frame) bool { return f.has("31 steps") })

	sim.SetSize(50, 12)
	f := waitFrame(t, frames, "the narrow layout", func(f frame) bool {
		return f.width == 50 && f.has("LAST STEPS") && !f.has("launches")
	})
	for _, r := range f.rows {
		if len([]rune(r)) > 50 {
			t.Errorf("row wider than 50: %q", r)
		}
	}
	sim.InjectKey(tcell.KeyRune, 'q', tcell.ModNone)
	select {
	case q := <-quit:
		if !q {
			t.Error("Run returned, but not as quit")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("q did not quit")
	}
}

func TestScreenQuitKeys(t *testing.T) {
	for _, k := range []struct {
		key tcell.Key
		r   rune
	}{{tcell.KeyEscape, 0}, {tcell.KeyCtrlC, 0}, {tcell.KeyRune, 'Q'}} {
		sim, scr, _ := simulated(t, fixed(), 80, 24)
		quit := make(chan bool, 1)
		go func() { quit <- scr.Run(context.Background()) }()
		sim.InjectKey(k.key, k.r, tcell.ModNone)
		select {
		case q := <-quit:
			if !q {
				t.Errorf("key %v %q: not as quit", k.key, k.r)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("key %v %q did not quit", k.key, k.r)
		}
	}
	if quitKey(tcell.NewEventKey(tcell.KeyRune, 'x', tcell.ModNone)) {
		t.Error("x quits")
	}
}

func TestScreenEndsWithItsContext(t *testing.T) {
	_, scr, frames := simulated(t, fixed(), 80, 24)
	ctx, cancel := context.WithCancel(context.Background())
	quit := make(chan bool, 1)
	go func() { quit <- scr.Run(ctx) }()
	waitFrame(t, frames, "a header", func(f frame) bool { return strings.HasPrefix(f.rows[0], "gpuprof top") })
	cancel()
	select {
	case q := <-quit:
		if q {
			t.Error("the context ended, yet Run says the user quit")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run outlived its context")
	}
}
