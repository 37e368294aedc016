// Package faults is kfn's fault suite: events flow at a steady rate from
// the publisher through JetStream and the dispatcher to a real Node.js
// function, each part a real process of its own (nats-server built from
// its Go module, the eventbridge binary as publisher and as dispatcher,
// kfn's Node.js host), while one fault strikes: the dispatcher killed with
// SIGKILL twice, NATS killed and restarted on its store, the function
// killed, the function gone ("at zero") and back, the function too slow
// then fast again. Every test checks that each event the publisher
// acknowledged reached the function at least once, that none was
// dead-lettered, and reports the duplicates.
package faults
