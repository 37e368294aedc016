package figures

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// Figure is one measured number of kfn, with its anchor when there is one.
type Figure struct {
	// Group is the component measured ("event bridge", "runtimes", ...).
	Group string `json:"group"`
	// Name says what was measured, unique within the group
	// ("throughput", "p99 latency at 1,000 events/s").
	Name string `json:"name"`
	// Unit of Value and AnchorValue ("events/s", "ms", "MiB", "s").
	Unit string `json:"unit"`
	// Value is kfn's number.
	Value float64 `json:"value"`
	// Anchor names what kfn is compared with in the same run ("bare
	// pipeline"); empty when there is no anchor.
	Anchor string `json:"anchor,omitempty"`
	// AnchorValue is the anchor's number, in Unit.
	AnchorValue float64 `json:"anchorValue,omitempty"`
	// Target is what DESIGN.md asks of this figure; the zero Target asks
	// nothing.
	Target Target `json:"target,omitzero"`
	// Series, when set, makes the figure a point (X, Value) of a scaling
	// curve of that title, plotted by bench/report.
	Series string `json:"series,omitempty"`
	// X is the figure's position on its Series' horizontal axis.
	X float64 `json:"x,omitempty"`
	// XLabel names the horizontal axis ("Subscriptions").
	XLabel string `json:"xLabel,omitempty"`
}

// Target is a goal for a Figure: each bound set (not zero) must hold.
type Target struct {
	// Max is the largest acceptable Value.
	Max float64 `json:"max,omitempty"`
	// Min is the smallest acceptable Value.
	Min float64 `json:"min,omitempty"`
	// MinRatio is the smallest acceptable Value/AnchorValue.
	MinRatio float64 `json:"minRatio,omitempty"`
	// MaxRatio is the largest acceptable Value/AnchorValue.
	MaxRatio float64 `json:"maxRatio,omitempty"`
	// Text says the target as DESIGN.md does ("< 5 ms", ">= 60% of bare").
	Text string `json:"text,omitempty"`
}

// Ratio is Value/AnchorValue, or 0 without an anchor value.
func (f Figure) Ratio() float64 {
	if f.AnchorValue == 0 {
		return 0
	}
	return f.Value / f.AnchorValue
}

// Set reports whether the target asks anything.
func (t Target) Set() bool { return t.Max != 0 || t.Min != 0 || t.MinRatio != 0 || t.MaxRatio != 0 }

// Met reports whether value (and its ratio to anchor) meets the target; an
// unset target is met.
func (t Target) Met(value, ratio float64) bool {
	if t.Max != 0 && value > t.Max {
		return false
	}
	if t.Min != 0 && value < t.Min {
		return false
	}
	if t.MinRatio != 0 && ratio < t.MinRatio {
		return false
	}
	if t.MaxRatio != 0 && ratio > t.MaxRatio {
		return false
	}
	return true
}

// Append adds figs as JSON lines to the file at path (created when
// missing); an empty path writes nothing, so a program run without
// -figures only prints its table.
func Append(path string, figs ...Figure) error {
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("open figures file: %w", err)
	}
	enc := json.NewEncoder(f)
	for _, fig := range figs {
		if err := enc.Encode(fig); err != nil {
			f.Close()
			return fmt.Errorf("write figure %s/%s: %w", fig.Group, fig.Name, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close figures file: %w", err)
	}
	return nil
}

// Read returns the figures of r, one JSON object a line; blank lines are
// skipped and a malformed line is an error naming its number.
func Read(r io.Reader) ([]Figure, error) {
	var out []Figure
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var f Figure
		if err := json.Unmarshal(line, &f); err != nil {
			return nil, fmt.Errorf("figures line %d: %w", n, err)
		}
		if f.Group == "" || f.Name == "" {
			return nil, fmt.Errorf("figures line %d: %w", n, errors.New("a figure needs a group and a name"))
		}
		out = append(out, f)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read figures: %w", err)
	}
	return out, nil
}
