// Package observe records what becomes of each delivery beside doing it:
// the Steps told to Observers and counted for Counts, the Prometheus
// metrics of each Subscription, and, when a tracer is given, the spans of
// its attempts, replies and events given up (spans.go). A Recorder serves
// a dispatcher; a Record, one Subscription's worker.
package observe
