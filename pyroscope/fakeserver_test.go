package pyroscope

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// received is one upload as the fake server got it.
type received struct {
	query          map[string]string // name, from, until, spyName
	user, password string
	tenant         string
	profile        *profile.Profile
	bytes          int
}

// fakeServer stands in for Pyroscope's /ingest: answer decides each
// request's fate (its number from 1); a request it answers 200 to is
// parsed as pyroscope-go sends it and kept.
type fakeServer struct {
	*httptest.Server
	answer func(w http.ResponseWriter, r *http.Request, n int64) int
	hits   atomic.Int64
	t      testing.TB

	mu  sync.Mutex
	got []received
}

func newFakeServer(t testing.TB, answer func(w http.ResponseWriter, r *http.Request, n int64) int) *fakeServer {
	f := &fakeServer{answer: answer, t: t}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func ok(http.ResponseWriter, *http.Request, int64) int { return http.StatusOK }

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	n := f.hits.Add(1)
	status := f.answer(w, r, n)
	if status != http.StatusOK {
		w.WriteHeader(status)
		io.WriteString(w, http.StatusText(status)+" from the fake server")
		return
	}
	if r.URL.Path != "/ingest" || r.Method != http.MethodPost {
		f.t.Errorf("fake server: %s %s, want POST /ingest", r.Method, r.URL.Path)
	}
	file, _, err := r.FormFile("profile")
	if err != nil {
		f.t.Errorf("fake server: no profile part: %v", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	data, _ := io.ReadAll(file)
	p, err := profile.Parse(bytes.NewReader(data))
	if err != nil {
		f.t.Errorf("fake server: the profile part does not parse: %v", err)
	}
	rec := received{query: map[string]string{}, tenant: r.Header.Get("X-Scope-OrgID"), profile: p, bytes: len(data)}
	for _, k := range []string{"name", "from", "until", "spyName"} {
		rec.query[k] = r.URL.Query().Get(k)
	}
	rec.user, rec.password, _ = r.BasicAuth()
	f.mu.Lock()
	f.got = append(f.got, rec)
	f.mu.Unlock()
}

func (f *fakeServer) received() []received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]received(nil), f.got...)
}

// hang is an answer that holds the request until the client gives up.
// It reads the body first: only then does Go's server watch the
// connection, and see the client close it.
func hang(_ http.ResponseWriter, r *http.Request, _ int64) int {
	io.Copy(io.Discard, r.Body)
	<-r.Context().Done()
	return http.StatusServiceUnavailable
}

// logBuffer is a slog destination tests can read.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func testLogger() (*slog.Logger, *logBuffer) {
	buf := &logBuffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo})), buf
}

// waitFor polls cond until it holds or within passes.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// newPusher is a Pusher to url that the test closes at its end.
func newPusher(t testing.TB, cfg Config) (*Pusher, *logBuffer) {
	t.Helper()
	log, buf := testLogger()
	p, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(t.Context()) })
	return p, buf
}

// upload is a small cpu upload of the window just ended, of rank r.
func upload(r int, samples int) Upload {
	now := time.Now()
	return Upload{
		Service: "train",
		Labels:  map[string]string{"host": "h1", "pid": "100", "rank": string(rune('0' + r%10))},
		Start:   now.Add(-10 * time.Second), End: now,
		Profile: manySamples(samples, time.Time{}),
	}
}

// accounted checks that every push is in exactly one place.
func accounted(t testing.TB, st Stats) {
	t.Helper()
	if n := st.Sent + st.FailedTotal() + st.DroppedTotal() + uint64(st.Queued+st.InFlight); n != st.Pushed {
		t.Errorf("pushed %d, but sent %d + failed %d + dropped %d + queued %d + in flight %d = %d",
			st.Pushed, st.Sent, st.FailedTotal(), st.DroppedTotal(), st.Queued, st.InFlight, n)
	}
}
