// Package admission is the one check an event passes before it is stored
// on behalf of a sender, whatever carried it: a publish (package
// publisher), a sink's reply (package reply) or an event a Function's host
// emits (a publish). It records the sender's namespace in the event and
// refuses one that names a sender itself, keeps reserved sources for their
// namespaces, and bounds chains of events with a hop count; Rates bounds
// the events each sender namespace stores a second, publishes and replies
// together.
package admission
