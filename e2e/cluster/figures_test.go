package cluster

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// coldStarts collects the cold-start figures the scenarios measure, printed
// after the suite (and read by make bench).
var coldStarts figures

// figures are named durations measured by the scenarios.
type figures struct {
	mu    sync.Mutex
	rows  []figure
	notes []string
}

type figure struct {
	kind         string
	ready, total time.Duration
}

func (f *figures) add(kind string, ready, total time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rows = append(f.rows, figure{kind, ready, total})
}

// note adds a line printed after the figures: what a scenario saw of
// where a figure's time went.
func (f *figures) note(line string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notes = append(f.notes, line)
}

// print writes one line per figure, then the notes.
func (f *figures) print(w io.Writer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.rows {
		switch r.kind {
		case "event":
			fmt.Fprintf(w, "cold start from zero, event: published -> pod ready %s, -> delivered %s\n", r.ready.Round(time.Millisecond), r.total.Round(time.Millisecond))
		case "http":
			fmt.Fprintf(w, "cold start from zero, HTTP through the gateway: request -> answer %s\n", r.total.Round(time.Millisecond))
		case "pool event":
			fmt.Fprintf(w, "warm pool wake, event: published -> delivered %s\n", r.total.Round(time.Millisecond))
		case "pool claim event", "pool claim http":
			fmt.Fprintf(w, "warm pool wake, %s: the event bridge's claims took %s\n", strings.TrimPrefix(r.kind, "pool claim "), r.total.Round(time.Millisecond))
		case "pool http":
			fmt.Fprintf(w, "warm pool wake, HTTP through the gateway: request -> answer %s\n", r.total.Round(time.Millisecond))
		}
	}
	for _, n := range f.notes {
		fmt.Fprintln(w, n)
	}
}
