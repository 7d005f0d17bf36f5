package metrics

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/gpuprof/gpuprof/internal/testenv"
)

// TestPromlint: client_golang's linter (promtool's rules) finds nothing
// in gpuprof's own families, every one of them served.
func TestPromlint(t *testing.T) {
	var mine []*dto.MetricFamily
	for name, mf := range gather(t, fedExporter(t)) {
		if strings.HasPrefix(name, "gpuprof_") {
			mine = append(mine, mf)
		}
	}
	if len(mine) < 20 {
		t.Fatalf("only %d gpuprof families served", len(mine))
	}
	problems, err := promlint.NewWithMetricFamilies(mine).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// TestPromtool: promtool check metrics accepts the gpuprof_* families of
// a scrape (the DCGM ones fail its lint by their camelCase labels, as
// dcgm-exporter's own do).
func TestPromtool(t *testing.T) {
	promtool := testenv.Promtool(t)
	text := gpuprofOnly(scrape(t, fedExporter(t)))
	if !strings.Contains(text, "# TYPE gpuprof_step_seconds histogram") {
		t.Fatalf("no step histogram in:\n%s", text)
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
