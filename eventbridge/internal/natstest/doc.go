// Package natstest runs a real NATS server with JetStream inside a test
// process: random port, temporary store directory, stopped when the test
// ends, restartable on the same port and store to simulate a NATS restart.
package natstest
