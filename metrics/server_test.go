package metrics

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/events"
)

func TestParseAddr(t *testing.T) {
	for in, want := range map[string]string{
		"9464":          "127.0.0.1:9464",
		":9464":         "127.0.0.1:9464",
		"0":             "127.0.0.1:0",
		"0.0.0.0:9464":  "0.0.0.0:9464",
		"localhost:80":  "localhost:80",
		"[::1]:9464":    "[::1]:9464",
		"10.1.2.3:9464": "10.1.2.3:9464",
	} {
		if got, err := ParseAddr(in); err != nil || got != want {
			t.Errorf("ParseAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "9464x", ":", "host:", "65536", "-1", "1.2.3.4", "a b:1", "::1", "http://h:1", "+80", "080"} {
		got, err := ParseAddr(in)
		if err == nil {
			t.Errorf("ParseAddr(%q) = %q, no error", in, got)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "give a port") || strings.Contains(msg, "\n") {
			t.Errorf("ParseAddr(%q): %q, want one line saying what to give", in, msg)
		}
	}
}

// TestServe: Start binds the port asked (0: one picked), serves /metrics,
// and Close stops it, bounded even with a scraper that never finishes
// its request.
func TestServe(t *testing.T) {
	e := fedExporter(t)
	addr, err := e.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if addr == "127.0.0.1:0" || e.Addr() != addr {
		t.Fatalf("bound %q, Addr %q", addr, e.Addr())
	}
	if _, err := e.Start("127.0.0.1:0"); err == nil {
		t.Errorf("a second Start: no error")
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `gpuprof_build_info{goversion=`) ||
		!strings.Contains(string(body), "gpuprof_step_seconds_bucket") {
		t.Fatalf("GET /metrics: %d\n%s", resp.StatusCode, body)
	}
	// A scraper that sends half a request and waits.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /metrics HTTP/1.1\r\nHost: x\r\n")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the server has taken the connection
	start := time.Now()
	if err := e.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if d := time.Since(start); d > closeWithin+time.Second {
		t.Errorf("Close took %v with a scrape hanging, want at most %v", d, closeWithin)
	}
	if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
		t.Errorf("still serving after Close")
	}
	if err := e.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

func TestStartBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	e := fedExporter(t)
	if _, err := e.Start(ln.Addr().String()); err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("Start on a busy port: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("Close of an exporter never served: %v", err)
	}
}

// TestConcurrentUse: steps, GPU rounds and Xids from their goroutines
// while scrapes run (go test -race checks the sharing); every step fed
// is counted.
func TestConcurrentUse(t *testing.T) {
	e := fedExporter(t)
	const n = 500
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		for i := range n {
			s := fullStep(7, 1)
			s.Index = i
			e.Step(s)
		}
	}()
	go func() {
		defer wg.Done()
		for i := range n {
			e.GPUs(fullRound())
			e.Xid(events.Xid{GPU: i % 2, Code: uint64(i)})
		}
	}()
	go func() {
		defer wg.Done()
		for range 20 {
			scrape(t, e)
		}
	}()
	wg.Wait()
	fams := gather(t, e)
	if got := value(fams, "gpuprof_steps_total", map[string]string{"pid": "7", "verdict": "gpu_compute"}); got != n {
		t.Errorf("%v steps counted, want %d", got, n)
	}
}
