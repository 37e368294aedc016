package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/kfn-dev/kfn/bench/figures"
)

// savedRun is one repetition as bench/results/runs.json keeps it: the
// figures behind BENCHMARKS.md as data, so that a run of some programs
// (-only) rewrites their rows and keeps the others' from the run that
// measured them.
type savedRun struct {
	Program string           `json:"program"`
	Rep     int              `json:"rep"`
	Took    time.Duration    `json:"took"`
	Figures []figures.Figure `json:"figures"`
	Err     string           `json:"error,omitempty"`
	Command string           `json:"command"`
	At      time.Time        `json:"at"`
	Quick   bool             `json:"quick,omitempty"`
	Stolen  string           `json:"stolen,omitempty"`
}

// loadRuns reads the repetitions saveRuns wrote to path; none when there
// is no file yet.
func loadRuns(path string) ([]repetition, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var saved []savedRun
	if err := json.Unmarshal(data, &saved); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	out := make([]repetition, 0, len(saved))
	for _, s := range saved {
		out = append(out, repetition{program: s.Program, rep: s.Rep, took: s.Took, figures: s.Figures,
			err: s.Err, command: s.Command, at: s.At, quick: s.Quick, stolen: s.Stolen})
	}
	return out, nil
}

// saveRuns writes runs to path as JSON.
func saveRuns(path string, runs []repetition) error {
	saved := make([]savedRun, 0, len(runs))
	for _, r := range runs {
		saved = append(saved, savedRun{Program: r.program, Rep: r.rep, Took: r.took, Figures: r.figures,
			Err: r.err, Command: r.command, At: r.at, Quick: r.quick, Stolen: r.stolen})
	}
	data, err := json.MarshalIndent(saved, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// merge returns the repetitions of every program of the table, in its
// order: fresh ones for the programs that ran (ran holds their labels),
// saved ones for the others. A saved repetition of another mode (quick
// or full) than this run's, or of a program no longer in the table, is
// left out: a row never mixes the two.
func merge(table []program, ran map[string]bool, fresh, saved []repetition, quick bool) []repetition {
	var out []repetition
	for _, p := range table {
		label := p.label
		if label == "" {
			label = p.name
		}
		from := saved
		if ran[label] {
			from = fresh
		}
		for _, r := range from {
			if r.program == label && (ran[label] || r.quick == quick) {
				out = append(out, r)
			}
		}
	}
	return out
}
