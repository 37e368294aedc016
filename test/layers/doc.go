// Package layers holds kfn's import graph to its layers (see the README's
// layout): contracts under api/ and runtimes at the bottom; controller,
// eventbridge and scaler as siblings above them that never import each
// other; local and the command line assembling them; the binaries on top;
// test infrastructure (test/) only in tests, benchmarks and tools. Its one
// test reads the graph from `go list -deps`.
package layers
