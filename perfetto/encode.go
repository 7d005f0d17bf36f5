package perfetto

import (
	"strconv"
	"unicode/utf8"
)

// enc builds trace events by appending to a byte slice: a few events at a
// time (one slice, or a step with its phases and counters), written whole
// or not at all, so the cap never cuts an event in half.
type enc struct {
	b     []byte
	count int  // events in b
	first bool // the args object being written has no member yet
}

func (e *enc) reset() { e.b, e.count = e.b[:0], 0 }

// begin opens an event of phase ph.
func (e *enc) begin(ph byte) {
	if e.count > 0 {
		e.b = append(e.b, ",\n"...)
	}
	e.count++
	e.b = append(e.b, `{"ph":"`...)
	e.b = append(e.b, ph, '"')
}

// end closes the event.
func (e *enc) end() { e.b = append(e.b, '}') }

// field starts member k of the event; ph always comes first, so a comma
// always goes before. Keys are constants: they need no escaping.
func (e *enc) field(k string) {
	e.b = append(e.b, ',', '"')
	e.b = append(e.b, k...)
	e.b = append(e.b, '"', ':')
}

func (e *enc) uintField(k string, v uint64) {
	e.field(k)
	e.b = strconv.AppendUint(e.b, v, 10)
}

func (e *enc) intField(k string, v int64) {
	e.field(k)
	e.b = strconv.AppendInt(e.b, v, 10)
}

// usField writes ns nanoseconds as microseconds, exactly: the integer
// part, then up to three decimals (Perfetto reads them back to the
// nanosecond; a float64 division would not always).
func (e *enc) usField(k string, ns uint64) {
	e.field(k)
	e.b = appendUS(e.b, ns)
}

func (e *enc) strField(k, v string) {
	e.field(k)
	e.b = appendQuoted(e.b, v)
}

// args opens the event's args object; arg adds to it, endArgs closes it.
func (e *enc) args() {
	e.field("args")
	e.b = append(e.b, '{')
	e.first = true
}

func (e *enc) arg(k string) {
	if !e.first {
		e.b = append(e.b, ',')
	}
	e.first = false
	e.b = append(e.b, '"')
	e.b = append(e.b, k...)
	e.b = append(e.b, '"', ':')
}

func (e *enc) endArgs() { e.b = append(e.b, '}') }

func (e *enc) strArg(k, v string) {
	e.arg(k)
	e.b = appendQuoted(e.b, v)
}

func (e *enc) uintArg(k string, v uint64) {
	e.arg(k)
	e.b = strconv.AppendUint(e.b, v, 10)
}

func (e *enc) intArg(k string, v int) {
	e.arg(k)
	e.b = strconv.AppendInt(e.b, int64(v), 10)
}

// floatArg writes v to prec decimals (-1: as many as read back to v),
// trailing zeros left out. JSON has no NaN or infinity: callers leave
// those out (finite).
func (e *enc) floatArg(k string, v float64, prec int) {
	e.arg(k)
	e.b = appendFloat(e.b, v, prec)
}

// msArg writes seconds as milliseconds, to the nanosecond.
func (e *enc) msArg(k string, seconds float64) { e.floatArg(k, seconds*1e3, 6) }

func appendFloat(b []byte, v float64, prec int) []byte {
	n := len(b)
	b = strconv.AppendFloat(b, v, 'f', prec, 64)
	if prec <= 0 {
		return b
	}
	for b[len(b)-1] == '0' {
		b = b[:len(b)-1]
	}
	if b[len(b)-1] == '.' {
		b = b[:len(b)-1]
	}
	if len(b) == n+2 && b[n] == '-' && b[n+1] == '0' {
		b = append(b[:n], '0') // -0.0000001 to 6 decimals
	}
	return b
}

func appendUS(b []byte, ns uint64) []byte {
	b = strconv.AppendUint(b, ns/1000, 10)
	r := ns % 1000
	if r == 0 {
		return b
	}
	b = append(b, '.', byte('0'+r/100), byte('0'+r/10%10), byte('0'+r%10))
	for b[len(b)-1] == '0' {
		b = b[:len(b)-1]
	}
	return b
}

func appendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	b = appendEscaped(b, s)
	return append(b, '"')
}

const hex = "0123456789abcdef"

// appendEscaped appends s as the inside of a JSON string: quotes,
// backslashes and control characters escaped, invalid UTF-8 (a name read
// from a process's memory) as U+FFFD, as encoding/json does.
func appendEscaped(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\t':
				b = append(b, '\\', 't')
			case '\r':
				b = append(b, '\\', 'r')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	return append(b, s[start:]...)
}

// fileBase is the last element of a path, without allocating.
func fileBase(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}
