// Command report is `make bench`: it runs every benchmark program under
// bench/ a few times, reads the figures each repetition appends (package
// bench/figures), and writes BENCHMARKS.md: per figure kfn's median with
// the spread of the repetitions, the anchor measured in the same run, the
// ratio, the target of shared/DESIGN.md and whether the median meets it,
// under a header naming the machine and the versions measured.
//
// BENCH_QUICK=1 runs each program once with short settings, to check the
// harness in a few minutes; its figures are not the ones to quote.
package main
