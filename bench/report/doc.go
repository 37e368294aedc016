// Command report runs every benchmark under bench/ several times, one
// repetition of the whole suite after another, reads the figures they print
// as JSON lines (package bench/result), and writes BENCHMARKS.md: for each
// figure kfn's median with the spread, the anchor measured in the same run,
// the ratio, the target from DESIGN.md and whether it was met; plus the
// scaling curves as PNG files and the hand-measured peers section.
//
// It is what `make bench` runs, from the repository root:
//
//	go run ./bench/report [-reps 3] [-quick] [-out BENCHMARKS.md] [-results bench/results]
//
// Adding a benchmark is one entry in suite (suite.go); adding a target is
// one entry in targets.
package main
