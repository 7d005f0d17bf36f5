package pyroscope

import (
	"bytes"
	"compress/gzip"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

func decode(t *testing.T, data []byte) *profile.Profile {
	t.Helper()
	if !bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		t.Fatalf("encoded profile is not gzipped (starts % x)", data[:min(4, len(data))])
	}
	p, err := profile.ParseData(data)
	if err != nil {
		t.Fatalf("parse the encoded profile: %v", err)
	}
	return p
}

func TestEncodeRoundTrip(t *testing.T) {
	at := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	p := buildProfile([]string{"kernel_launches/count", "gpu_time/nanoseconds"}, "gpu_time/nanoseconds", 1, at, []sample{
		{stack: "main;step;forward;matmul", values: []int64{40, 2_000_000}, labels: map[string]string{"phase": "compute", "span_id": "0000000000000007"}},
		{stack: "main;step;backward", values: []int64{60, 3_000_000}, labels: map[string]string{"phase": "compute"}},
	})
	enc, r, err := encode(p, DefaultMaxSamples, DefaultMaxProfileBytes)
	if err != nil || r != "" {
		t.Fatalf("encode: %v (%s)", err, r)
	}
	got := decode(t, enc.data)
	if !slices.Equal(totals(got), []int64{100, 5_000_000}) || len(got.Sample) != 2 || enc.trimmed != 0 {
		t.Errorf("decoded: totals %v, %d samples, %d trimmed; want [100 5000000], 2, 0", totals(got), len(got.Sample), enc.trimmed)
	}
	if got.TimeNanos != at.UnixNano() {
		t.Errorf("TimeNanos %d, want %d", got.TimeNanos, at.UnixNano())
	}
	if got.Sample[0].Label["span_id"][0] != "0000000000000007" {
		t.Errorf("span_id label lost: %v", got.Sample[0].Label)
	}
}

func TestEncodeTrimsToMaxSamples(t *testing.T) {
	p := manySamples(20000, time.Now())
	enc, r, err := encode(p, 16000, DefaultMaxProfileBytes*4)
	if err != nil || r != "" {
		t.Fatalf("encode: %v (%s)", err, r)
	}
	got := decode(t, enc.data)
	if len(got.Sample) != 16000 || enc.trimmed != 4000 {
		t.Fatalf("%d samples kept, %d trimmed; want 16000 and 4000", len(got.Sample), enc.trimmed)
	}
	// The 4000 smallest go: sample i is worth i+1 periods, so what is
	// left is worth at least 4001.
	smallest := slices.MinFunc(got.Sample, func(a, b *profile.Sample) int { return int(a.Value[0] - b.Value[0]) })
	if smallest.Value[0] != 4001*cpuPeriod {
		t.Errorf("smallest kept sample %d periods, want 4001", smallest.Value[0]/cpuPeriod)
	}
	if len(got.Location) != 16000+2 || len(got.Function) != 16000+2 {
		t.Errorf("%d locations and %d functions kept, want the kept samples' 16002", len(got.Location), len(got.Function))
	}
	if len(p.Sample) != 20000 {
		t.Errorf("the caller's profile lost samples: %d left", len(p.Sample))
	}
}

func TestEncodeTrimsToMaxBytes(t *testing.T) {
	p := manySamples(5000, time.Now())
	var full bytes.Buffer
	p.WriteUncompressed(&full)
	limit := full.Len() / 3
	enc, r, err := encode(p, DefaultMaxSamples, limit)
	if err != nil || r != "" {
		t.Fatalf("encode to %d bytes: %v (%s)", limit, err, r)
	}
	zr, err := gzip.NewReader(bytes.NewReader(enc.data))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(zr)
	if len(raw) > limit || enc.trimmed == 0 {
		t.Errorf("%d bytes uncompressed after trimming %d samples, the limit %d", len(raw), enc.trimmed, limit)
	}
	if enc.trimmed > 5000*3/4 {
		t.Errorf("%d of 5000 samples trimmed to fit a third of the size: too many", enc.trimmed)
	}
}

func TestEncodeTooBig(t *testing.T) {
	if _, r, err := encode(manySamples(10, time.Now()), DefaultMaxSamples, 16); r != TooBig || err == nil {
		t.Errorf("a profile over any size = %q, %v; want too_big", r, err)
	}
}

func TestEncodeInvalid(t *testing.T) {
	now := time.Now()
	inconsistent := manySamples(2, now)
	inconsistent.Sample[1].Value = []int64{1, 2}
	for name, p := range map[string]*profile.Profile{
		"nil":             nil,
		"no sample types": {},
		"dash in type":    buildProfile([]string{"gpu-time/nanoseconds"}, "gpu-time/nanoseconds", 1, now, nil),
		"inconsistent":    inconsistent,
	} {
		_, r, err := encode(p, DefaultMaxSamples, DefaultMaxProfileBytes)
		if r != Invalid || err == nil {
			t.Errorf("%s: %q, %v; want invalid", name, r, err)
		}
	}
}

// A sample's weight in trimming is its share of each type: a sample with
// most of the GPU time but few launches outweighs one of middling both.
func TestTrimWeighsEachType(t *testing.T) {
	p := buildProfile([]string{"kernel_launches/count", "gpu_time/nanoseconds"}, "gpu_time/nanoseconds", 1, time.Now(), []sample{
		{stack: "a", values: []int64{1, 900}},
		{stack: "b", values: []int64{30, 50}},
		{stack: "c", values: []int64{69, 50}},
	})
	got := trim(p, 2)
	var kept []string
	for _, s := range got.Sample {
		kept = append(kept, s.Location[0].Line[0].Function.Name)
	}
	slices.Sort(kept)
	if strings.Join(kept, ",") != "a,c" {
		t.Errorf("kept %v, want a (90%% of GPU time) and c (69%% of launches)", kept)
	}
}

func TestInWindow(t *testing.T) {
	now := time.Now()
	for d, want := range map[time.Duration]Reason{
		0: "", -58 * time.Minute: "", 8 * time.Minute: "",
		-61 * time.Minute: TooOld, -time.Hour + 30*time.Second: TooOld, 11 * time.Minute: TooNew,
	} {
		if got := inWindow(now.Add(d), now); got != want {
			t.Errorf("inWindow(now%+v) = %q, want %q", d, got, want)
		}
	}
}
