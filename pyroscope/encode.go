package pyroscope

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/pprof/profile"
)

// The server's ingestion window (validation.reject-older-than and
// -newer-than), less a margin for the time an upload takes to arrive and
// for clocks a little apart: a profile outside it is refused with 422.
const (
	maxAge   = time.Hour - time.Minute
	maxAhead = 10*time.Minute - time.Minute
)

// inWindow says whether a profile of time t is within the server's
// ingestion window at now: "" if so, else TooOld or TooNew.
func inWindow(t, now time.Time) Reason {
	switch {
	case t.Before(now.Add(-maxAge)):
		return TooOld
	case t.After(now.Add(maxAhead)):
		return TooNew
	}
	return ""
}

// encoded is a profile as it is sent: gzipped pprof, as pyroscope-go sends
// runtime/pprof's.
type encoded struct {
	data    []byte
	trimmed int // samples cut to fit the limits
}

var errInvalid = errors.New("invalid profile")

// encode serializes p, cut to maxSamples samples and maxBytes
// uncompressed bytes by dropping its smallest samples (trim). A reason
// says why it cannot be sent: Invalid (errInvalid wrapped) or TooBig.
func encode(p *profile.Profile, maxSamples, maxBytes int) (encoded, Reason, error) {
	if err := checkProfile(p); err != nil {
		return encoded{}, Invalid, fmt.Errorf("%w: %w", errInvalid, err)
	}
	n := len(p.Sample)
	if n > maxSamples {
		p = trim(p, maxSamples)
	}
	var raw bytes.Buffer
	if err := p.WriteUncompressed(&raw); err != nil {
		return encoded{}, Invalid, fmt.Errorf("%w: %w", errInvalid, err)
	}
	// Each cut aims 10% under the limit by the bytes a sample takes on
	// average; a few cover the case where the big samples are the big
	// ones.
	for try := 0; raw.Len() > maxBytes; try++ {
		if try == 4 || len(p.Sample) <= 1 {
			return encoded{}, TooBig, fmt.Errorf("profile of %d bytes uncompressed, the limit %d", raw.Len(), maxBytes)
		}
		keep := int(float64(len(p.Sample)) * float64(maxBytes) / float64(raw.Len()) * 0.9)
		p = trim(p, max(keep, 1))
		raw.Reset()
		if err := p.WriteUncompressed(&raw); err != nil {
			return encoded{}, Invalid, fmt.Errorf("%w: %w", errInvalid, err)
		}
	}
	var gz bytes.Buffer
	zw := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(zw)
	zw.Reset(&gz)
	zw.Write(raw.Bytes())
	if err := zw.Close(); err != nil {
		return encoded{}, Invalid, err
	}
	return encoded{data: gz.Bytes(), trimmed: n - len(p.Sample)}, "", nil
}

// gzipWriters are reused: a new writer allocates over 1 MB of compressor
// state, 20 times the cost of the rest of encoding a 100-sample profile.
// BestSpeed: CPU on the training host is dearer than bytes on the wire,
// and pprof compresses well at any level.
var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return zw
}}

// checkProfile refuses what the server refuses whatever its limits.
func checkProfile(p *profile.Profile) error {
	if p == nil {
		return errors.New("no profile")
	}
	if len(p.SampleType) == 0 {
		return errors.New("no sample type")
	}
	for _, st := range p.SampleType {
		if strings.Contains(st.Type, "-") {
			return fmt.Errorf("sample type %q: the server refuses '-' in one", st.Type)
		}
	}
	return p.CheckValid()
}

// trim returns a compacted copy of p with its n biggest samples, a
// sample's size being its share of each sample type's total, summed over
// the types: kernel launches and GPU nanoseconds weigh alike.
func trim(p *profile.Profile, n int) *profile.Profile {
	totals := make([]float64, len(p.SampleType))
	for _, s := range p.Sample {
		for i, v := range s.Value {
			totals[i] += math.Abs(float64(v))
		}
	}
	share := func(s *profile.Sample) float64 {
		var f float64
		for i, v := range s.Value {
			if totals[i] > 0 {
				f += math.Abs(float64(v)) / totals[i]
			}
		}
		return f
	}
	kept := slices.Clone(p.Sample)
	slices.SortStableFunc(kept, func(a, b *profile.Sample) int { return cmp.Compare(share(b), share(a)) })
	kept = kept[:min(n, len(kept))]
	sub := &profile.Profile{
		SampleType: p.SampleType, DefaultSampleType: p.DefaultSampleType,
		Sample: kept, Mapping: p.Mapping, Location: p.Location, Function: p.Function,
		Comments: p.Comments, DocURL: p.DocURL, DropFrames: p.DropFrames, KeepFrames: p.KeepFrames,
		TimeNanos: p.TimeNanos, DurationNanos: p.DurationNanos, PeriodType: p.PeriodType, Period: p.Period,
	}
	// Compact keeps only the locations, functions and mappings the kept
	// samples use, in a profile apart from p.
	return sub.Compact()
}

// stringLabelNames are the sample labels of p that the server makes
// series labels: its string labels, bar the span's.
func stringLabelNames(p *profile.Profile) []string {
	var names []string
	for _, s := range p.Sample {
		for k := range s.Label {
			if !slices.Contains(names, k) && !slices.Contains(splitLabels, k) {
				names = append(names, k)
			}
		}
	}
	return names
}
