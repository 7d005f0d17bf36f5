package pyroscope

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/gpuprof/gpuprof/internal/pyroquery"
	"github.com/gpuprof/gpuprof/internal/testenv"
)

// The three kinds of profile gpuprof sends, built by hand: on-CPU samples
// at 97 Hz, blocked time, and kernel launches with GPU time in one pprof.
// Their samples carry phase and, some, span_id (a step's index).
func gpuprofProfiles(at time.Time, rank int) []*profile.Profile {
	span := func(step int) string { return fmt.Sprintf("%016x", step) }
	k := int64(rank + 1) // the ranks differ, so that a mix-up shows
	cpu := buildProfile([]string{"cpu/nanoseconds"}, "cpu/nanoseconds", cpuPeriod, at, []sample{
		{stack: "train.py <module>;train.py train;train.py step;libtorch_cpu.so at::native::add", values: []int64{30 * k * cpuPeriod}, labels: map[string]string{"phase": "compute", "span_id": span(7)}},
		{stack: "train.py <module>;train.py train;dataloader.py __next__;collate.py collate", values: []int64{12 * k * cpuPeriod}, labels: map[string]string{"phase": "data"}},
		{stack: "train.py <module>;train.py train;train.py step", values: []int64{5 * k * cpuPeriod}, labels: map[string]string{"phase": "other"}},
	})
	wait := buildProfile([]string{"wait/nanoseconds"}, "wait/nanoseconds", 1, at, []sample{
		{stack: "train.py <module>;train.py train;queues.py get;libc.so.6 sem_timedwait", values: []int64{400_000_000 * k}, labels: map[string]string{"phase": "data", "span_id": span(7)}},
		{stack: "train.py <module>;train.py train;train.py step;libcuda.so.1 cuStreamSynchronize", values: []int64{90_000_000 * k}, labels: map[string]string{"phase": "sync", "span_id": span(8)}},
	})
	gpu := buildProfile([]string{"kernel_launches/count", "gpu_time/nanoseconds"}, "gpu_time/nanoseconds", 1, at, []sample{
		{stack: "train.py <module>;train.py step;linear.py forward;[kernel] ampere_sgemm_128x64_tn", values: []int64{64 * k, 700_000_000 * k}, labels: map[string]string{"phase": "compute", "span_id": span(7)}},
		{stack: "train.py <module>;train.py step;adam.py step;[kernel] multi_tensor_apply_kernel", values: []int64{16 * k, 100_000_000 * k}, labels: map[string]string{"phase": "compute", "span_id": span(8)}},
	})
	return []*profile.Profile{cpu, wait, gpu}
}

// typeIDs are the server's profile type IDs for p, one a sample type, as
// OUTPUTS.md says it names them: process_cpu for a "cpu" type, else the
// last sample type's name.
func typeIDs(p *profile.Profile) []string {
	name := p.SampleType[len(p.SampleType)-1].Type
	if p.SampleType[0].Type == "cpu" {
		name = "process_cpu"
	}
	var ids []string
	for _, st := range p.SampleType {
		ids = append(ids, fmt.Sprintf("%s:%s:%s:%s:%s", name, st.Type, st.Unit, p.PeriodType.Type, p.PeriodType.Unit))
	}
	return ids
}

// expected is what the server should answer for one type: totals over
// the whole service, by leaf function, by phase and by span.
type expected struct {
	total   int64
	byLeaf  map[string]int64
	byPhase map[string]float64
	bySpan  map[string]int64
	byRank  map[string]float64
}

func (e *expected) add(p *profile.Profile, i int, rank string) {
	for _, s := range p.Sample {
		v := s.Value[i]
		e.total += v
		e.byLeaf[s.Location[0].Line[0].Function.Name] += v
		e.byPhase[s.Label["phase"][0]] += float64(v)
		e.byRank[rank] += float64(v)
		if sp := s.Label["span_id"]; len(sp) > 0 {
			e.bySpan[sp[0]] += v
		}
	}
}

// The real server takes the three kinds of profile from two ranks and
// gives back, through its query API, the types, the series labels and
// the totals pushed: overall, by function, by phase, by rank and by span.
func TestRealServerReadsBackWhatWasPushed(t *testing.T) {
	srv := testenv.StartPyroscope(t)
	const service = "gpuprof-test"
	p, _ := newPusher(t, Config{URL: srv.URL, Service: service, Labels: map[string]string{"cluster": "ci"}})
	now := time.Now()
	start := now.Add(-10 * time.Second)
	want := map[string]*expected{}
	for rank := range 2 {
		for _, prof := range gpuprofProfiles(start, rank) {
			for i, id := range typeIDs(prof) {
				if want[id] == nil {
					want[id] = &expected{byLeaf: map[string]int64{}, byPhase: map[string]float64{}, bySpan: map[string]int64{}, byRank: map[string]float64{}}
				}
				want[id].add(prof, i, strconv.Itoa(rank))
			}
			p.Push(Upload{
				Labels: map[string]string{"host": "ci-host", "pid": strconv.Itoa(1000 + rank), "rank": strconv.Itoa(rank),
					"gpu": strconv.Itoa(rank), "group": "job-1"},
				Start: start, End: now, Profile: prof,
			})
		}
	}
	if err := p.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if st := p.Stats(); st.Sent != 6 {
		t.Fatalf("sent %d of 6: %s", st.Sent, st.Summary())
	}

	q := pyroquery.New(srv.URL)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	from, until := now.Add(-time.Hour), now.Add(time.Minute)
	wantIDs := slices.Sorted(maps.Keys(want))
	if len(wantIDs) != 4 {
		t.Fatalf("type IDs %v: want 4 (the GPU pprof is two)", wantIDs)
	}
	var gotIDs []string
	waitFor(t, 20*time.Second, "the server lists the 4 types", func() bool {
		types, err := q.ProfileTypes(ctx, from, until)
		if err != nil {
			t.Fatal(err)
		}
		gotIDs = gotIDs[:0]
		for _, ty := range types {
			gotIDs = append(gotIDs, ty.ID)
		}
		slices.Sort(gotIDs)
		return slices.Equal(gotIDs, wantIDs)
	})
	t.Logf("profile types: %v", gotIDs)

	matcher := fmt.Sprintf("{service_name=%q}", service)
	for name, values := range map[string][]string{
		"host": {"ci-host"}, "pid": {"1000", "1001"}, "rank": {"0", "1"}, "gpu": {"0", "1"}, "group": {"job-1"},
		"cluster": {"ci"}, "phase": {"compute", "data", "other", "sync"}, "pyroscope_spy": {SpyName},
	} {
		got, err := q.LabelValues(ctx, name, matcher, from, until)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Sort(got); !slices.Equal(got, values) {
			t.Errorf("label %s: values %v, want %v", name, got, values)
		}
	}
	// span_id is taken out of the series: a step index makes no series.
	names, err := q.LabelNames(ctx, matcher, from, until)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(names, "span_id") {
		t.Errorf("span_id is a series label: %v", names)
	}

	for _, id := range wantIDs {
		w := want[id]
		fg, err := q.SelectMergeStacktraces(ctx, id, matcher, from, until)
		if err != nil {
			t.Fatal(err)
		}
		self, err := fg.SelfByFunction()
		if err != nil {
			t.Fatal(err)
		}
		if int64(fg.Total) != w.total || !maps.Equal(self, w.byLeaf) {
			t.Errorf("%s: total %d, self by function %v; pushed %d, %v", id, fg.Total, self, w.total, w.byLeaf)
		}
		for _, by := range []struct {
			label string
			want  map[string]float64
		}{{"phase", w.byPhase}, {"rank", w.byRank}} {
			series, err := q.SelectSeries(ctx, id, matcher, []string{by.label}, from, until)
			if err != nil {
				t.Fatal(err)
			}
			if got := pyroquery.TotalsBy(series, by.label); !maps.Equal(got, by.want) {
				t.Errorf("%s by %s: %v, pushed %v", id, by.label, got, by.want)
			}
		}
		for span, v := range w.bySpan {
			fg, err := q.SelectMergeSpanProfile(ctx, id, matcher, []string{span}, from, until)
			if err != nil {
				t.Fatal(err)
			}
			if int64(fg.Total) != v {
				t.Errorf("%s span %s: total %d, pushed %d", id, span, fg.Total, v)
			}
		}
	}
}

// A profile over the server's default burst (2 MiB uncompressed) is
// refused however long one waits (with 422, resource_exhausted, on
// /ingest): sent whole it fails, rate-limited; trimmed to
// DefaultMaxProfileBytes the server takes it.
func TestRealServerBurstLimit(t *testing.T) {
	srv := testenv.StartPyroscope(t)
	now := time.Now()
	big := func() *profile.Profile {
		prof := manySamples(15000, now.Add(-10*time.Second))
		for _, f := range prof.Function { // long frame names: 2.5-4 MiB in 15,000 samples
			f.Name = fmt.Sprintf("%s_%0120d", f.Name, 0)
		}
		return prof
	}
	var raw bytes.Buffer
	big().WriteUncompressed(&raw)
	if raw.Len() <= 2<<20 || raw.Len() >= 4<<20 {
		t.Fatalf("the test profile is %d bytes: want between 2 and 4 MiB", raw.Len())
	}

	whole, _ := newPusher(t, Config{URL: srv.URL, Service: "gpuprof-big", MaxProfileBytes: 4 << 20, Interval: time.Second})
	whole.Push(Upload{Start: now.Add(-10 * time.Second), End: now, Profile: big()})
	whole.Close(t.Context())
	if st := whole.Stats(); st.Failed[RateLimited] != 1 {
		t.Errorf("a profile of %d bytes sent whole: %s; want it refused 429", raw.Len(), st.Summary())
	}

	trimmed, _ := newPusher(t, Config{URL: srv.URL, Service: "gpuprof-big"})
	trimmed.Push(Upload{Start: now.Add(-10 * time.Second), End: now, Profile: big()})
	if err := trimmed.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	st := trimmed.Stats()
	if st.Sent != 1 || st.Trimmed != 1 {
		t.Fatalf("the profile of %d bytes trimmed: %s; want it trimmed and sent", raw.Len(), st.Summary())
	}
	t.Logf("%d bytes uncompressed: %d of 15000 samples trimmed; sent %d bytes gzipped", raw.Len(), st.TrimmedSamples, st.SentBytes)
}
