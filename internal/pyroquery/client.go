// Package pyroquery reads profiles back from a Pyroscope server through
// its query API (Connect's JSON over HTTP, times in ms), for tests that
// check what gpuprof pushed arrived as it was pushed.
package pyroquery

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Client queries one server.
type Client struct {
	URL  string // the server's base URL, e.g. http://127.0.0.1:4040
	HTTP *http.Client
}

// New is a Client of the server at url.
func New(url string) *Client {
	return &Client{URL: strings.TrimSuffix(url, "/"), HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// call POSTs req as JSON to the querier's method and decodes the answer
// into resp.
func (c *Client) call(ctx context.Context, method string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL+"/querier.v1.QuerierService/"+method, bytes.NewReader(body))
	if err != nil {
		return err
	}
	r.Header.Set("Content-Type", "application/json")
	res, err := c.HTTP.Do(r)
	if err != nil {
		return fmt.Errorf("query %s: %w", method, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return fmt.Errorf("query %s: %w", method, err)
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("query %s: HTTP %d: %s", method, res.StatusCode, data)
	}
	if err := json.Unmarshal(data, resp); err != nil {
		return fmt.Errorf("query %s: decode %.200s: %w", method, data, err)
	}
	return nil
}

// ProfileType is one type the server holds profiles of.
type ProfileType struct {
	ID         string `json:"ID"` // name:sampleType:sampleUnit:periodType:periodUnit
	Name       string `json:"name"`
	SampleType string `json:"sampleType"`
	SampleUnit string `json:"sampleUnit"`
	PeriodType string `json:"periodType"`
	PeriodUnit string `json:"periodUnit"`
}

// ProfileTypes are the types of the profiles between start and end.
func (c *Client) ProfileTypes(ctx context.Context, start, end time.Time) ([]ProfileType, error) {
	var resp struct {
		ProfileTypes []ProfileType `json:"profileTypes"`
	}
	err := c.call(ctx, "ProfileTypes", map[string]any{"start": ms(start), "end": ms(end)}, &resp)
	return resp.ProfileTypes, err
}

// LabelNames are the label names of the series matcher selects, e.g.
// {service_name="train"}.
func (c *Client) LabelNames(ctx context.Context, matcher string, start, end time.Time) ([]string, error) {
	var resp struct {
		Names []string `json:"names"`
	}
	err := c.call(ctx, "LabelNames", map[string]any{"matchers": []string{matcher}, "start": ms(start), "end": ms(end)}, &resp)
	return resp.Names, err
}

// LabelValues are the values of label name in the series matcher selects.
func (c *Client) LabelValues(ctx context.Context, name, matcher string, start, end time.Time) ([]string, error) {
	var resp struct {
		Names []string `json:"names"`
	}
	err := c.call(ctx, "LabelValues", map[string]any{"name": name, "matchers": []string{matcher}, "start": ms(start), "end": ms(end)}, &resp)
	return resp.Names, err
}

// SelectMergeStacktraces is the flame graph of profile type typeID over
// the series selector selects, merged.
func (c *Client) SelectMergeStacktraces(ctx context.Context, typeID, selector string, start, end time.Time) (*FlameGraph, error) {
	var resp struct {
		Flamegraph FlameGraph `json:"flamegraph"`
	}
	err := c.call(ctx, "SelectMergeStacktraces", map[string]any{
		"profile_typeID": typeID, "label_selector": selector, "start": ms(start), "end": ms(end), "format": 1,
	}, &resp)
	return &resp.Flamegraph, err
}

// SelectMergeSpanProfile is the flame graph of the samples labelled with
// one of spans (span_id, 16 hex digits).
func (c *Client) SelectMergeSpanProfile(ctx context.Context, typeID, selector string, spans []string, start, end time.Time) (*FlameGraph, error) {
	var resp struct {
		Flamegraph FlameGraph `json:"flamegraph"`
	}
	err := c.call(ctx, "SelectMergeSpanProfile", map[string]any{
		"profile_typeID": typeID, "label_selector": selector, "span_selector": spans,
		"start": ms(start), "end": ms(end), "format": 1,
	}, &resp)
	return &resp.Flamegraph, err
}

// Series is one series of SelectSeries: its group's labels and the sum
// of its points.
type Series struct {
	Labels map[string]string
	Total  float64
}

// SelectSeries sums profile type typeID over the series selector selects,
// grouped by the labels groupBy, over the whole of start to end.
func (c *Client) SelectSeries(ctx context.Context, typeID, selector string, groupBy []string, start, end time.Time) ([]Series, error) {
	var resp struct {
		Series []struct {
			Labels []struct{ Name, Value string } `json:"labels"`
			Points []struct {
				Value float64 `json:"value"`
			} `json:"points"`
		} `json:"series"`
	}
	err := c.call(ctx, "SelectSeries", map[string]any{
		"profile_typeID": typeID, "label_selector": selector, "group_by": groupBy,
		"start": ms(start), "end": ms(end), "step": end.Sub(start).Seconds(),
	}, &resp)
	out := make([]Series, 0, len(resp.Series))
	for _, s := range resp.Series {
		ser := Series{Labels: map[string]string{}}
		for _, l := range s.Labels {
			ser.Labels[l.Name] = l.Value
		}
		for _, p := range s.Points {
			ser.Total += p.Value
		}
		out = append(out, ser)
	}
	return out, err
}

// TotalsBy sums series by their value of label.
func TotalsBy(series []Series, label string) map[string]float64 {
	m := map[string]float64{}
	for _, s := range series {
		m[s.Labels[label]] += s.Total
	}
	return m
}

func ms(t time.Time) int64 { return t.UnixMilli() }

// int64s decodes a JSON array of int64s, which protobuf's JSON writes as
// strings.
type int64s []int64

func (v *int64s) UnmarshalJSON(b []byte) error {
	var raw []json.Number // takes "12" as well as 12
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*v = make(int64s, len(raw))
	for i, n := range raw {
		x, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil {
			return err
		}
		(*v)[i] = x
	}
	return nil
}

// int64js decodes one int64, as a string or a number.
type int64js int64

func (v *int64js) UnmarshalJSON(b []byte) error {
	x, err := strconv.ParseInt(strings.Trim(string(b), `"`), 10, 64)
	*v = int64js(x)
	return err
}
