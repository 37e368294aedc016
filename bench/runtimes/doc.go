// Command runtimes benchmarks the kfn function hosts against plain servers
// of the same language, in one run on one machine: hello-world maximum
// throughput (keep-alive, 64 connections), latency at a fixed low rate, and
// cold start (process start to the first /healthz 200). It prints a table
// with the ratios the targets in DESIGN.md are stated in.
//
//	go run ./bench/runtimes [-duration 5s] [-rounds 6] [-json out.json]
//
// The machine is shared with the load generator and, often, with other
// work: each throughput round measures the plain server and the kfn host
// back to back (alternating which goes first) and the ratio reported is the
// geometric mean of the rounds' ratios; latency requests go to the two servers of a
// language in turns, so noise hits both alike.
//
// -peer NAME=HOST:PORT also measures a Node.js server someone started by
// hand (a peer's runtime whose code may not be part of this repository,
// such as Kyma's) beside plain node:http and the kfn host, with the same
// load generator; it prints a table and writes no figures:
//
//	go run ./bench/runtimes -only nodejs -peer kyma=127.0.0.1:18931
package main
