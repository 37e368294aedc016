// Package figures is the one result format of kfn's benchmark programs:
// each program under bench/ given -figures FILE appends what it measured
// there as JSON lines of [Figure], kfn's number beside the anchor it was
// measured against in the same run, with the target of shared/DESIGN.md.
// The bench/report program runs the programs, reads the figures of every
// repetition and writes BENCHMARKS.md from them.
package figures
