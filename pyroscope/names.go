package pyroscope

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// The server's rules for the "name" an upload is filed under,
// "service{k=v,...}" (pkg/og/storage/segment/key.go, pkg/og/flameql and
// pkg/validation/validate.go of Pyroscope v1.9.0).
const (
	// maxLabelValue is validation.max-length-label-value (the service
	// name is a label value too).
	maxLabelValue = 2048
	// maxSeriesLabels is validation.max-label-names-per-series, of which
	// the server sets four itself (serverLabels).
	maxSeriesLabels = 30
	serverLabels    = 4 // __name__, __delta__, service_name, pyroscope_spy
)

// reservedLabels are set by the server from the upload itself: a label of
// the same name would be a duplicate, and the series refused.
var reservedLabels = []string{"service_name", "pyroscope_spy"}

// splitLabels are sample labels the server takes out of the series (a
// span's profile), so they do not count against maxSeriesLabels.
var splitLabels = []string{"span_id", "profile_id"}

func serviceRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-'
}

// SanitizeService makes s a valid service name: every character outside
// [A-Za-z0-9_.-] becomes '_', and it is cut to the server's length limit.
// It is "" only for "".
func SanitizeService(s string) string {
	var b strings.Builder
	for _, r := range s {
		if serviceRune(r) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return truncate(b.String(), maxLabelValue)
}

func checkService(s string) error {
	if s == "" {
		return errors.New("pyroscope: empty service name")
	}
	if len(s) > maxLabelValue {
		return fmt.Errorf("pyroscope: service name of %d bytes: the server takes up to %d", len(s), maxLabelValue)
	}
	for _, r := range s {
		if !serviceRune(r) {
			return fmt.Errorf("pyroscope: service name %q: only letters, digits, '_', '.' and '-' are allowed, not %q", s, r)
		}
	}
	return nil
}

// CheckLabelName says whether name may name a series label: a Prometheus
// label name ([A-Za-z_][A-Za-z0-9_]*), not one the server reserves ("__"
// and those it sets itself).
func CheckLabelName(name string) error {
	if name == "" {
		return errors.New("empty label name")
	}
	for i, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '_' || r >= '0' && r <= '9' && i > 0) {
			return fmt.Errorf("label name %q: use letters, digits and '_', not starting with a digit", name)
		}
	}
	if strings.HasPrefix(name, "__") || slices.Contains(reservedLabels, name) {
		return fmt.Errorf("label name %q is the server's own", name)
	}
	return nil
}

// CheckLabel says whether name=value may be a series label as given. A
// value may not hold ',' or '}' (they end it in the upload's name), nor
// start or end with a space (the server trims them), and is valid UTF-8
// of at most 2048 bytes.
func CheckLabel(name, value string) error {
	if err := CheckLabelName(name); err != nil {
		return err
	}
	switch {
	case value == "":
		return fmt.Errorf("label %s: empty value", name)
	case strings.ContainsAny(value, ",}"):
		return fmt.Errorf("label %s=%q: a value may not hold ',' or '}'", name, value)
	case strings.TrimSpace(value) != value:
		return fmt.Errorf("label %s=%q: a value may not start or end with a space", name, value)
	case !utf8.ValidString(value):
		return fmt.Errorf("label %s: the value is not UTF-8", name)
	case len(value) > maxLabelValue:
		return fmt.Errorf("label %s: a value of %d bytes; the server takes up to %d", name, len(value), maxLabelValue)
	}
	return nil
}

// SanitizeLabelValue makes v a valid label value, for values that are
// data (host names, groups): ',' and '}' become '_', invalid UTF-8 '?',
// surrounding space is trimmed and the length cut to the server's limit.
func SanitizeLabelValue(v string) string {
	v = strings.ToValidUTF8(v, "?")
	v = strings.Map(func(r rune) rune {
		if r == ',' || r == '}' {
			return '_'
		}
		return r
	}, v)
	return strings.TrimSpace(truncate(strings.TrimSpace(v), maxLabelValue))
}

// seriesName is the upload's name: service{k=v,...}, the labels sorted so
// that a series is always named alike. Values must be sanitized.
func seriesName(service string, labels map[string]string) string {
	var b strings.Builder
	b.WriteString(service)
	b.WriteByte('{')
	for i, k := range slices.Sorted(maps.Keys(labels)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(labels[k])
	}
	b.WriteByte('}')
	return b.String()
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
