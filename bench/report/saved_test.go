package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/bench/figures"
)

// A run of some programs (-only) rewrites their rows and keeps the
// others' from the run that measured them, in the table's order; rows of
// the other mode (quick or full) or of programs no longer in the table
// are not kept.
func TestMergeKeepsTheRowsOfProgramsThatDidNotRun(t *testing.T) {
	table := []program{{name: "runtimes"}, {name: "eventbridge"}, {name: "eventbridge", label: "eventbridge-r3"}, {name: "cluster", label: "cluster"}}
	day1, day2 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC), time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	fig := func(v float64) []figures.Figure {
		return []figures.Figure{{Group: "g", Name: "n", Unit: "s", Value: v}}
	}
	saved := []repetition{
		{program: "runtimes", rep: 1, figures: fig(1), at: day1, stolen: "7%"},
		{program: "eventbridge", rep: 1, figures: fig(2), at: day1},
		{program: "eventbridge-r3", rep: 1, figures: fig(3), at: day1, quick: true},
		{program: "cluster", rep: 1, figures: fig(4), at: day1},
		{program: "gone", rep: 1, figures: fig(5), at: day1},
	}
	fresh := []repetition{{program: "cluster", rep: 1, figures: fig(40), at: day2}}
	got := merge(table, map[string]bool{"cluster": true}, fresh, saved, false)
	var programs []string
	for _, r := range got {
		programs = append(programs, r.program)
	}
	assert.Equal(t, []string{"runtimes", "eventbridge", "cluster"}, programs, "table order; the quick row and the gone program left out")
	assert.Equal(t, 40.0, got[2].figures[0].Value, "the cluster row is this run's")
	assert.Equal(t, day1, got[0].at, "a kept row keeps its date")

	// Save and load keep every field the report renders.
	path := filepath.Join(t.TempDir(), "runs.json")
	require.NoError(t, saveRuns(path, got))
	back, err := loadRuns(path)
	require.NoError(t, err)
	assert.Equal(t, got, back)
	none, err := loadRuns(filepath.Join(t.TempDir(), "missing.json"))
	require.NoError(t, err)
	assert.Empty(t, none, "no saved runs yet: nothing to keep")
}
