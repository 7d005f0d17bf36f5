package pyroscope

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// What reaches the server is what was pushed: the series name with the
// labels sorted, the window, gpuprof's spy name, the credentials and the
// tenant, and the profile itself.
func TestPushSendsWhatWasPushed(t *testing.T) {
	srv := newFakeServer(t, ok)
	p, _ := newPusher(t, Config{URL: srv.URL, User: "123", Password: "s3cret", TenantID: "team-a",
		Labels: map[string]string{"cluster": "east", "host": "overridden"}})
	var pushed []Upload
	for r := range 3 {
		u := upload(r, 5)
		u.Labels["gpu"] = strconv.Itoa(r)
		u.Labels["group"] = "a,b}" // data: sanitized
		pushed = append(pushed, u)
		p.Push(u)
	}
	if err := p.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	got := srv.received()
	if len(got) != 3 {
		t.Fatalf("server got %d uploads, want 3", len(got))
	}
	slices.SortFunc(got, func(a, b received) int { return strings.Compare(a.query["name"], b.query["name"]) })
	var bytes uint64
	for r, g := range got {
		u := pushed[r]
		want := "train{cluster=east,gpu=" + strconv.Itoa(r) + ",group=a_b_,host=h1,pid=100,rank=" + strconv.Itoa(r) + "}"
		if g.query["name"] != want {
			t.Errorf("name %q, want %q", g.query["name"], want)
		}
		if g.query["from"] != strconv.FormatInt(u.Start.UnixNano(), 10) || g.query["until"] != strconv.FormatInt(u.End.UnixNano(), 10) {
			t.Errorf("window %s..%s, want %d..%d", g.query["from"], g.query["until"], u.Start.UnixNano(), u.End.UnixNano())
		}
		if g.query["spyName"] != SpyName || g.user != "123" || g.password != "s3cret" || g.tenant != "team-a" {
			t.Errorf("spy %q, auth %q:%q, tenant %q; want gpuprof, 123:s3cret, team-a", g.query["spyName"], g.user, g.password, g.tenant)
		}
		if g.profile.TimeNanos != u.Start.UnixNano() || g.profile.DurationNanos != int64(10*time.Second) {
			t.Errorf("profile time %d for %v, want the window's start %d", g.profile.TimeNanos, time.Duration(g.profile.DurationNanos), u.Start.UnixNano())
		}
		if !slices.Equal(totals(g.profile), totals(u.Profile)) || len(g.profile.Sample) != 5 {
			t.Errorf("profile totals %v in %d samples, pushed %v in 5", totals(g.profile), len(g.profile.Sample), totals(u.Profile))
		}
		bytes += uint64(g.bytes)
	}
	st := p.Stats()
	if st.Pushed != 3 || st.Sent != 3 || st.SentBytes != bytes || st.FailedTotal()+st.DroppedTotal() != 0 || st.Retries != 0 {
		t.Errorf("stats %+v; want 3 pushed and sent, %d bytes, nothing else", st, bytes)
	}
	accounted(t, st)
}

// What the server would refuse is dropped before it is sent, counted by
// why.
func TestPushDropsWhatTheServerRefuses(t *testing.T) {
	srv := newFakeServer(t, ok)
	p, logs := newPusher(t, Config{URL: srv.URL})
	now := time.Now()
	badName := upload(0, 1)
	badName.Labels["bad-name"] = "x"
	noService := upload(0, 1)
	noService.Service = ""
	old := upload(0, 1)
	old.Start = now.Add(-2 * time.Hour)
	ahead := upload(0, 1)
	ahead.Start = now.Add(time.Hour)
	noStart := upload(0, 1)
	noStart.Start = time.Time{}
	tooMany := upload(0, 1)
	for i := range 30 {
		tooMany.Labels["l"+strconv.Itoa(i)] = "v"
	}
	tooBig := upload(0, 1)
	tooBig.Profile = manySamples(20000, time.Time{})
	for _, u := range []Upload{badName, noService, old, ahead, noStart, tooMany, {Service: "train", Start: now}} {
		p.Push(u)
	}
	log, _ := testLogger()
	small, _ := New(Config{URL: srv.URL, MaxProfileBytes: 64}, log)
	small.Push(tooBig)
	if err := small.Close(context.Background()); err != nil {
		t.Errorf("Close with nothing queued: %v", err)
	}
	if st := small.Stats(); st.Dropped[TooBig] != 1 {
		t.Errorf("a profile over 64 bytes: dropped %v, want too_big 1", st.Dropped)
	}
	st := p.Stats()
	want := map[Reason]uint64{Invalid: 5, TooOld: 1, TooNew: 1}
	if !maps.Equal(st.Dropped, want) || st.Pushed != 7 || st.Sent != 0 {
		t.Errorf("dropped %v of %d pushed, %d sent; want %v of 7, none sent", st.Dropped, st.Pushed, st.Sent, want)
	}
	if srv.hits.Load() != 0 {
		t.Errorf("the server got %d requests for profiles it would refuse", srv.hits.Load())
	}
	// One warning a reason, not one a profile.
	if n := strings.Count(logs.String(), "reason=invalid"); n != 1 {
		t.Errorf("%d warnings for 5 invalid uploads, want 1:\n%s", n, logs)
	}
	accounted(t, st)
}

// Profiles past the server's sample limit are trimmed, not dropped.
func TestPushTrimsToTheSampleLimit(t *testing.T) {
	srv := newFakeServer(t, ok)
	p, _ := newPusher(t, Config{URL: srv.URL})
	u := upload(0, 16500)
	p.Push(u)
	if err := p.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := srv.received()
	st := p.Stats()
	if len(got) != 1 || len(got[0].profile.Sample) != DefaultMaxSamples || st.Trimmed != 1 || st.TrimmedSamples != 500 {
		t.Fatalf("got %d uploads, trimmed %d (%d samples); want one of %d samples, 500 cut", len(got), st.Trimmed, st.TrimmedSamples, DefaultMaxSamples)
	}
	// The 500 smallest went: 1..500 periods of 1..16500.
	if sent, all := totals(got[0].profile)[0], totals(u.Profile)[0]; sent != all-500*501/2*cpuPeriod {
		t.Errorf("sent %d ns of %d, want all but the 500 smallest samples'", sent, all)
	}
}

func TestNewChecksConfig(t *testing.T) {
	for name, c := range map[string]struct {
		cfg  Config
		want string
	}{
		"no URL":         {Config{}, "http:// or https://"},
		"credentials":    {Config{URL: "http://u:p@h:4040"}, "holds credentials"},
		"no host":        {Config{URL: "http:///x"}, "no host"},
		"query":          {Config{URL: "http://h:4040/?x=1"}, "without a query"},
		"half auth":      {Config{URL: "http://h", User: "u"}, "both a user and a password"},
		"bad service":    {Config{URL: "http://h", Service: "a b"}, "only letters"},
		"bad label":      {Config{URL: "http://h", Labels: map[string]string{"k": "a,b"}}, "may not hold"},
		"negative limit": {Config{URL: "http://h", QueueLen: -1}, "negative"},
	} {
		p, err := New(c.cfg, nil)
		if err == nil {
			p.Close(t.Context())
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New = %v, want an error saying %q", name, err, c.want)
		}
	}
	_, err := New(Config{URL: "http://u:p@h:4040"}, nil)
	if !errors.Is(err, ErrCredentialsInURL) || strings.Contains(err.Error(), ":p@") {
		t.Errorf("credentials in the URL: %v; want ErrCredentialsInURL, the password redacted", err)
	}
}

func TestStatsSummary(t *testing.T) {
	st := Stats{Sent: 12, SentBytes: 3 << 20, Failed: map[Reason]uint64{Timeout: 2, Refused: 1},
		Dropped: map[Reason]uint64{QueueFull: 4}, LastError: "do http request: EOF"}
	want := "12 profiles sent (3.0 MiB), 3 failed (refused 1, timeout 2), 4 dropped (queue_full 4); last error: do http request: EOF"
	if got := st.Summary(); got != want {
		t.Errorf("Summary() =\n%s\nwant\n%s", got, want)
	}
}
