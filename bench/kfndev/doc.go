// Command kfndev measures the cold start of `kfn dev` with the example
// application: process start to the "is up on" line, which kfn dev prints
// once the embedded NATS server, publisher, gateway, dispatcher, scaler and
// every function of the project are running. Each start gets a fresh
// state directory, so nothing is reused from an earlier start.
//
//	go run ./bench/kfndev [-dir examples/shop] [-starts 5] [-jsonl]
package main
