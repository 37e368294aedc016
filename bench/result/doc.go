// Package result is the one machine-readable format every benchmark under
// bench/ reports in: a JSON object per line, one per figure, holding kfn's
// number and, where the benchmark measured one in the same run, the
// anchor's. bench/report reads these lines, repeats runs and renders
// BENCHMARKS.md; a benchmark only measures and emits.
package result
