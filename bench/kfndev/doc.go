// Command kfndev measures `kfn dev` from a cold start to ready with the
// example application (examples/shop): a fresh copy of the project each
// time (no .kfn state, so NATS starts empty), from exec to the "is up"
// line, after which every function process of the example answers. It
// also reports Ctrl-C to exit. Run from the repository root:
//
//	go run ./bench/kfndev -starts 5
package main
