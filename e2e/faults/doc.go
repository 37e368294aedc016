// Package faults is kfn's fault suite: events flow at a steady rate from the
// publisher through JetStream and the dispatcher to a real Node.js function
// while the suite breaks one part at a time (kill -9 the dispatcher, restart
// NATS, kill function processes, scale the function to zero and back, make
// it slow), and then proves that every event the publisher acknowledged was
// delivered at least once and none was dead-lettered. The package holds
// only tests; its test binary doubles as the NATS server and the event
// bridge child processes, so that a kill -9 is a real one.
package faults
