package pyroscope

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Reason says why an upload failed or was dropped. Its values are fixed
// strings, fit for a metric's label.
type Reason string

// Why the server did not take an upload (Stats.Failed), after the retries
// its window allowed.
const (
	Refused     Reason = "refused"      // no server listening
	Timeout     Reason = "timeout"      // no answer within Config.Timeout
	Network     Reason = "network"      // any other transport error (DNS, reset, TLS)
	Auth        Reason = "auth"         // 401 or 403: user, password or tenant
	RateLimited Reason = "rate_limited" // 429, or 422 resource_exhausted (Pyroscope's /ingest)
	Rejected    Reason = "rejected"     // any other 4xx (400, 413, 422): the server will not take it
	ServerError Reason = "server_error" // 5xx
	Other       Reason = "other"        // no HTTP answer and no transport error: pyroscope-go failed before sending
)

// Why an upload was never sent (Stats.Dropped).
const (
	QueueFull Reason = "queue_full" // the oldest queued upload, pushed out by a newer one
	TooOld    Reason = "too_old"    // its time is before the server's ingestion window (1 h)
	TooNew    Reason = "too_new"    // its time is after the window (10 min ahead)
	TooBig    Reason = "too_big"    // past Config.MaxProfileBytes even trimmed
	Invalid   Reason = "invalid"    // a name, label or profile the server would refuse
	Closed    Reason = "closed"     // pushed after Close, or still queued when Close's bound ran out
)

// Stats is what became of the uploads pushed so far. Every Push ends in
// exactly one of Sent, Failed and Dropped, or is still Queued or InFlight.
type Stats struct {
	Pushed    uint64            // Push calls
	Sent      uint64            // uploads the server accepted
	SentBytes uint64            // their gzipped pprof bytes
	Failed    map[Reason]uint64 // uploads the server did not take, by the last attempt's reason
	Dropped   map[Reason]uint64 // uploads never sent, by why
	Retries   uint64            // attempts after the first, of any upload
	// Trimmed counts the profiles cut to the server's sample or size
	// limit, TrimmedSamples the samples cut from them (the smallest).
	Trimmed        uint64
	TrimmedSamples uint64
	Queued         int // waiting now
	QueuedBytes    int
	InFlight       int // being sent now
	QueuePeak      int // the most ever queued: never above Config.QueueLen
	LastError      string
	LastErrorAt    time.Time
}

// FailedTotal is the number of failed uploads, all reasons.
func (s Stats) FailedTotal() uint64 { return sum(s.Failed) }

// DroppedTotal is the number of dropped uploads, all reasons.
func (s Stats) DroppedTotal() uint64 { return sum(s.Dropped) }

// Summary is one line for gpuprof's summary: what was sent, and what was
// not and why.
func (s Stats) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d profiles sent (%s)", s.Sent, mib(s.SentBytes))
	if n := s.FailedTotal(); n > 0 {
		fmt.Fprintf(&b, ", %d failed (%s)", n, byReason(s.Failed))
	}
	if n := s.DroppedTotal(); n > 0 {
		fmt.Fprintf(&b, ", %d dropped (%s)", n, byReason(s.Dropped))
	}
	if s.Trimmed > 0 {
		fmt.Fprintf(&b, ", %d trimmed to the server's limits (%d samples cut)", s.Trimmed, s.TrimmedSamples)
	}
	if s.LastError != "" && (s.FailedTotal() > 0 || s.DroppedTotal() > 0) {
		fmt.Fprintf(&b, "; last error: %s", s.LastError)
	}
	return b.String()
}

func (s Stats) clone() Stats {
	s.Failed, s.Dropped = maps.Clone(s.Failed), maps.Clone(s.Dropped)
	return s
}

func sum(m map[Reason]uint64) uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}

func byReason(m map[Reason]uint64) string {
	parts := make([]string, 0, len(m))
	for _, r := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", r, m[r]))
	}
	return strings.Join(parts, ", ")
}

func mib(n uint64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
