// Package feed tells the parts of a process that serve Subscriptions which
// ones to serve: [Targets] is what serves them (the event bridge's
// dispatcher delivers their events, the scaler counts their backlog), the
// [Feeder] is a controller that hands a cluster's Subscriptions to the
// Targets in every replica, and the [Lister] lists them for the publisher.
// The event bridge and the scaler both depend on it, and on nothing of each
// other.
package feed
