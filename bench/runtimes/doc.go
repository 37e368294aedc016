// Command runtimes benchmarks the kfn function hosts against plain servers
// of the same language, in one run on one machine: hello-world maximum
// throughput (keep-alive, 64 connections), latency at a fixed low rate, and
// cold start (process start to the first /healthz 200). It prints a table
// with the ratios the targets in DESIGN.md are stated in.
//
//	go run ./bench/runtimes [-duration 10s] [-rounds 3] [-json out.json]
package main
