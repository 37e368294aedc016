// Package natstest runs a real NATS server with JetStream inside a test
// process: random port, temporary store directory, stopped when the test
// ends, restartable on the same port and store to simulate a NATS restart,
// and reachable through a Proxy that can cut its clients off without a
// word from the server, as a killed server or a lost network does; or
// several servers routed into a JetStream cluster (StartCluster, or
// LaunchCluster in a program that is not a test, such as a benchmark).
package natstest
