package logging

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/go-logr/logr"
)

// Keys every line carries (ComponentKey comes from the logger a component
// is given, see Component) and the key of a line's error.
const (
	ComponentKey = "component"
	ErrorKey     = "error"
)

// Levels lists the values of a -log-level flag, for its help text.
const Levels = "debug, info, warn or error"

// ErrInvalidLevel is wrapped by ParseLevel's error.
var ErrInvalidLevel = errors.New("invalid log level")

// ErrInvalidFormat is wrapped by ParseFormat's error.
var ErrInvalidFormat = errors.New("invalid log format")

// ParseLevel reads a -log-level value: debug, info, warn or error (in any
// case). Anything else is an error wrapping ErrInvalidLevel.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("%w %q: want %s", ErrInvalidLevel, s, Levels)
}

// Format is how lines are written: JSON (the layout) or text, the same
// keys as key=value pairs for a person at a terminal.
type Format string

// The formats.
const (
	JSON Format = "json"
	Text Format = "text"
)

// ParseFormat reads a -log-format value: json or text. Anything else is an
// error wrapping ErrInvalidFormat.
func ParseFormat(s string) (Format, error) {
	switch Format(strings.ToLower(s)) {
	case JSON:
		return JSON, nil
	case Text:
		return Text, nil
	}
	return "", fmt.Errorf("%w %q: want json or text", ErrInvalidFormat, s)
}

// NewHandler returns the handler of the layout, writing lines at level and
// above to w.
func NewHandler(w io.Writer, level slog.Leveler, format Format) slog.Handler {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: replace}
	if format == Text {
		return slog.NewTextHandler(w, opts)
	}
	return slog.NewJSONHandler(w, opts)
}

// New returns a logger in the layout for a -log-level value; the error
// wraps ErrInvalidLevel. Components add their name with Component.
func New(w io.Writer, level string, format Format) (*slog.Logger, error) {
	l, err := ParseLevel(level)
	if err != nil {
		return nil, err
	}
	return slog.New(NewHandler(w, l, format)), nil
}

// Component returns the logger a component logs with: log with the
// component's name under ComponentKey. Give each component its own from
// the root logger; a logger that has a component already must not get
// another (slog would write the key twice).
func Component(log *slog.Logger, name string) *slog.Logger {
	return log.With(ComponentKey, name)
}

// Logr returns a logr.Logger (controller-runtime's logging interface)
// writing to log in the layout: its Error lines carry the error under
// ErrorKey, its V(n) levels below Info come out as debug, and names given
// with WithName under "logger".
func Logr(log *slog.Logger) logr.Logger {
	return logr.FromSlogHandler(log.Handler())
}

// replace keeps the layout: levels are one of the four names (logr's V(2)
// is slog level -2, which slog would write "DEBUG+2"), and logr's error key
// "err" is written as ErrorKey.
func replace(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.LevelKey:
		if l, ok := a.Value.Any().(slog.Level); ok {
			a.Value = slog.StringValue(standard(l).String())
		}
	case "err":
		a.Key = ErrorKey
	}
	return a
}

// standard rounds a level down to the nearest of the four standard ones
// (anything below Info is Debug).
func standard(l slog.Level) slog.Level {
	switch {
	case l >= slog.LevelError:
		return slog.LevelError
	case l >= slog.LevelWarn:
		return slog.LevelWarn
	case l >= slog.LevelInfo:
		return slog.LevelInfo
	default:
		return slog.LevelDebug
	}
}
