package result

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Figure is one number a benchmark measured in one run.
type Figure struct {
	// Name identifies the figure across runs and benchmarks, for example
	// "eventbridge/throughput". Points of a scaling curve share a Name and
	// differ in X.
	Name string `json:"name"`
	// Unit of Value and of Anchor.Value, for example "events/s" or "ms".
	Unit string `json:"unit"`
	// Value is kfn's number.
	Value float64 `json:"value"`
	// Anchor is the reference measured in the same run, if any.
	Anchor *Anchor `json:"anchor,omitempty"`
	// Ratio is kfn's number over the anchor's when the benchmark computed a
	// better estimate than Value/Anchor.Value (for example a geometric mean
	// of paired rounds); zero means "compute it".
	Ratio float64 `json:"ratio,omitempty"`
	// X is the point of a scaling curve (for example 100 Subscriptions), with
	// XLabel naming the axis; both are zero for a plain figure.
	X      float64 `json:"x,omitempty"`
	XLabel string  `json:"xLabel,omitempty"`
	// Note is a short free-text remark (method, conditions) shown with the figure.
	Note string `json:"note,omitempty"`
}

// Anchor is the reference a figure is compared with.
type Anchor struct {
	// Name says what the anchor is, for example "bare pipeline".
	Name string `json:"name"`
	// Value is the anchor's number, in the figure's unit.
	Value float64 `json:"value"`
}

// ErrInvalid is wrapped by the errors Validate and Parse return for a
// figure that cannot be used.
var ErrInvalid = errors.New("invalid figure")

// Validate reports whether f can be used: it needs a name and a unit.
func (f Figure) Validate() error {
	switch {
	case f.Name == "":
		return fmt.Errorf("%w: no name", ErrInvalid)
	case f.Unit == "":
		return fmt.Errorf("%w: %s: no unit", ErrInvalid, f.Name)
	case f.Anchor != nil && f.Anchor.Name == "":
		return fmt.Errorf("%w: %s: anchor without a name", ErrInvalid, f.Name)
	}
	return nil
}

// RatioOrComputed is Ratio when the benchmark set it, else Value over the
// anchor's value; it is 0 when there is no anchor or the anchor is 0.
func (f Figure) RatioOrComputed() float64 {
	if f.Ratio != 0 {
		return f.Ratio
	}
	if f.Anchor == nil || f.Anchor.Value == 0 {
		return 0
	}
	return f.Value / f.Anchor.Value
}

// Writer emits figures as JSON lines.
type Writer struct {
	enc *json.Encoder
}

// NewWriter returns a Writer that writes to w; a nil w discards everything,
// so a benchmark can call Emit whether or not JSON output was asked for.
func NewWriter(w io.Writer) *Writer {
	if w == nil {
		return &Writer{}
	}
	return &Writer{enc: json.NewEncoder(w)}
}

// Emit writes f as one line. It returns an error for an invalid figure or
// a failed write.
func (w *Writer) Emit(f Figure) error {
	if err := f.Validate(); err != nil {
		return err
	}
	if w.enc == nil {
		return nil
	}
	if err := w.enc.Encode(f); err != nil {
		return fmt.Errorf("write figure %s: %w", f.Name, err)
	}
	return nil
}

// Parse reads every line of r that is a JSON object and returns the
// figures; other lines (human-readable output mixed into the stream) are
// skipped. A JSON object that is not a valid figure is an error.
func Parse(r io.Reader) ([]Figure, error) {
	var out []Figure
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var f Figure
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			return nil, fmt.Errorf("line %d: %w: %v", n, ErrInvalid, err)
		}
		if err := f.Validate(); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, f)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read figures: %w", err)
	}
	return out, nil
}
