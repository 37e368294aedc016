// Package slots shares the dispatcher's delivery slots fairly among
// namespaces: every event's turn (its attempt and what settles it) runs
// in a slot, at most a bound of them at once, and when turns wait each
// slot that frees goes to the waiting namespace that runs the fewest, so
// that one namespace's fan-out, retries, large events or replies wait
// behind its own work, not in front of another's (Shares); and, while
// another namespace is active, each runs at most a few turns at once
// (WithPerNamespace), so that a burst runs beside the other's, not all at
// once.
package slots
