package testenv

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Promtool is the path of promtool (Debian's prometheus package), or a
// loud skip.
func Promtool(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		Skip(t, "promtool not installed (apt-get install prometheus)")
	}
	return p
}

// RequirePrometheus skips under -short (make check) and, loudly, without
// Debian's prometheus installed; it returns the server's path. A test
// calls it first where it prepares much for the server before starting it.
func RequirePrometheus(t testing.TB) string {
	t.Helper()
	skipShort(t, "starts a Prometheus server")
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		Skip(t, "prometheus not installed (apt-get install prometheus)")
	}
	return bin
}

// Prometheus is a Prometheus server run for a test.
type Prometheus struct {
	URL string // http://127.0.0.1:PORT
	log string // its output
}

// scrapeEvery is the test servers' scrape interval: a target is up a
// second or two after the start, and rates have two points a second on.
const scrapeEvery = time.Second

// StartPrometheus starts Debian's prometheus on 127.0.0.1 scraping
// targets (HOST:PORT, path /metrics) every second, as job "gpuprof", and
// waits until every target is up; it is stopped when the test ends.
// Under -short (make check) it skips; without prometheus installed it
// skips loudly.
func StartPrometheus(t testing.TB, targets ...string) *Prometheus {
	t.Helper()
	bin := RequirePrometheus(t)
	dir := t.TempDir()
	quoted := make([]string, len(targets))
	for i, tg := range targets {
		quoted[i] = strconv.Quote(tg)
	}
	config := fmt.Sprintf("global:\n  scrape_interval: %v\n  evaluation_interval: %v\n"+
		"scrape_configs:\n  - job_name: gpuprof\n    static_configs:\n      - targets: [%s]\n",
		scrapeEvery, scrapeEvery, strings.Join(quoted, ", "))
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	p := &Prometheus{URL: "http://" + addr, log: filepath.Join(dir, "prometheus.log")}
	logf, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); logf.Close() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-exited:
			t.Fatalf("prometheus exited: %v\n%s", err, p.Log())
		default:
		}
		up, err := p.targetsUp()
		if err == nil && up == len(targets) {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus: %d of %d targets up after 30 s (%v)\n%s", up, len(targets), err, p.Log())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Log is the server's output so far, for a failure message.
func (p *Prometheus) Log() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// targetsUp counts the active targets whose last scrape succeeded.
func (p *Prometheus) targetsUp() (int, error) {
	var r struct {
		Data struct {
			ActiveTargets []struct {
				Health string `json:"health"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if err := p.get("/api/v1/targets", &r); err != nil {
		return 0, err
	}
	up := 0
	for _, tg := range r.Data.ActiveTargets {
		if tg.Health == "up" {
			up++
		}
	}
	return up, nil
}

// Sample is one series of an instant query's result.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Query runs an instant query (/api/v1/query) now. A query Prometheus
// refuses (a parse error, say) is an error with its message; a scalar
// result is one Sample with no labels.
func (p *Prometheus) Query(q string) ([]Sample, error) {
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := p.get("/api/v1/query?query="+url.QueryEscape(q), &r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", q, r.Error)
	}
	var out []Sample
	switch r.Data.ResultType {
	case "vector":
		var vec []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(r.Data.Result, &vec); err != nil {
			return nil, err
		}
		for _, v := range vec {
			f, err := promValue(v.Value[1])
			if err != nil {
				return nil, err
			}
			out = append(out, Sample{Labels: v.Metric, Value: f})
		}
	case "scalar":
		var v [2]any
		if err := json.Unmarshal(r.Data.Result, &v); err != nil {
			return nil, err
		}
		f, err := promValue(v[1])
		if err != nil {
			return nil, err
		}
		out = append(out, Sample{Value: f})
	default:
		return nil, fmt.Errorf("query %s: result type %q", q, r.Data.ResultType)
	}
	return out, nil
}

// promValue reads a sample value, which the API sends as a string.
func promValue(v any) (float64, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("sample value %v is not a string", v)
	}
	return strconv.ParseFloat(s, 64)
}

func (p *Prometheus) get(path string, into any) error {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(p.URL + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	// A refused query comes with 400 and a JSON body saying why.
	return json.NewDecoder(resp.Body).Decode(into)
}

// freePort picks a free port on 127.0.0.1 for a server the test starts:
// bound and released, so another process could take it first, which the
// server's start then reports.
func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
