// Package reply turns a sink's CloudEvent reply into a new event: read
// from the sink's answer within a size bound, decoded and validated, one
// hop further than the event it answers (a bound on hops ends reply
// loops), and stored in the event stream as a publish by the namespace of
// the Subscription whose sink answered, held to the same checks (package
// admission) and bounds as a published event. The
// dispatcher counts, traces and logs each Result; a reply that cannot be
// an event is dropped, never retried, since the delivery itself succeeded.
package reply
