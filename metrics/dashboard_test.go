package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

const dashboardPath = "../docs/grafana/gpuprof-dashboard.json"

// dashboardQuery is one PromQL expression of the dashboard: a panel's
// target or a template variable's query.
type dashboardQuery struct {
	where, expr string
}

type dashboardPanel struct {
	Type, Title string
	Targets     []struct{ Expr string }
	Panels      []dashboardPanel // a collapsed row's
}

// dashboardQueries reads every query of the committed dashboard.
func dashboardQueries(t *testing.T) []dashboardQuery {
	t.Helper()
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels     []dashboardPanel
		Templating struct {
			List []struct {
				Name, Type, Definition string
			}
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	var out []dashboardQuery
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				out = append(out, dashboardQuery{"panel " + p.Title, tg.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			out = append(out, dashboardQuery{"variable " + v.Name, v.Definition})
		}
	}
	if len(out) < 20 {
		t.Fatalf("%s: only %d queries", dashboardPath, len(out))
	}
	return out
}

// metricName is how a gpuprof or DCGM series is named in PromQL.
var metricName = regexp.MustCompile(`\b(gpuprof_[a-z0-9_]+|DCGM_FI_[A-Z0-9_]+)\b`)

// served is every series name the exporter serves, fed everything it can
// serve: a family's, and a histogram's _bucket, _sum and _count.
func served(t *testing.T) map[string]bool {
	names := map[string]bool{}
	for name, mf := range gather(t, fedExporter(t)) {
		names[name] = true
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[name+s] = true
			}
		}
	}
	return names
}

// TestDashboardNamesServed: the committed dashboard parses, and every
// metric its queries name is one gpuprof serves.
func TestDashboardNamesServed(t *testing.T) {
	names := served(t)
	for _, q := range dashboardQueries(t) {
		used := metricName.FindAllString(q.expr, -1)
		if len(used) == 0 {
			t.Errorf("%s: %q names no gpuprof or DCGM metric", q.where, q.expr)
		}
		for _, n := range used {
			if !names[n] {
				t.Errorf("%s: %s is not served", q.where, n)
			}
		}
	}
}

// TestDocsListMetrics: docs/prometheus.md names every family the
// exporter serves, names none it does not, and shows the dashboard's
// straggler queries as they are.
func TestDocsListMetrics(t *testing.T) {
	b, err := os.ReadFile("../docs/prometheus.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	names := served(t)
	for name := range gather(t, fedExporter(t)) {
		if (strings.HasPrefix(name, "gpuprof_") || strings.HasPrefix(name, "DCGM_")) && !strings.Contains(doc, "`"+name+"`") {
			t.Errorf("docs/prometheus.md does not list %s", name)
		}
	}
	for _, n := range metricName.FindAllString(doc, -1) {
		if !names[n] && !notServed[n] {
			t.Errorf("docs/prometheus.md names %s, which is not served", n)
		}
	}
	stragglers := 0
	for _, q := range dashboardQueries(t) {
		if strings.HasPrefix(q.where, "panel Straggler") {
			stragglers++
			if !strings.Contains(doc, q.expr) {
				t.Errorf("docs/prometheus.md does not show the %s query as the dashboard has it:\n%s", q.where, q.expr)
			}
		}
	}
	if stragglers != 2 {
		t.Errorf("%d straggler panels, want 2", stragglers)
	}
}

// notServed are the names docs/prometheus.md says are left out, and why.
var notServed = map[string]bool{"DCGM_FI_DEV_FB_FREE": true}

// docsQueries are the PromQL blocks of docs/prometheus.md.
func docsQueries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../docs/prometheus.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, block := range regexp.MustCompile("(?s)```promql\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		for _, q := range strings.Split(strings.TrimSpace(block[1]), "\n\n") {
			out = append(out, q)
		}
	}
	return out
}

// grafanaVars stands in for the dashboard's variables where a query
// runs outside Grafana: every instance and rank, a 1 min rate window.
var grafanaVars = strings.NewReplacer(`$__rate_interval`, `1m`, `$instance`, `.*`, `$rank`, `.*`)
