package schedule

// Endpoints tells whether a sink Service can take requests now. In a
// cluster it watches EndpointSlices (package endpoints); in local mode it
// is the process supervisor.
type Endpoints interface {
	// Ready reports whether the Service namespace/name has at least one
	// ready endpoint, and returns a channel that is closed when that may
	// have changed (the caller then asks again). The channel is never nil.
	Ready(namespace, service string) (ready bool, changed <-chan struct{})
}

// AlwaysReady is an Endpoints for which every Service is always ready.
type AlwaysReady struct{}

// never is a channel that is never closed.
var never = make(chan struct{})

// Ready reports true and a channel that never closes.
func (AlwaysReady) Ready(string, string) (bool, <-chan struct{}) { return true, never }

var _ Endpoints = AlwaysReady{}

// Waking is what an Endpoints may also tell: that a Service without a
// ready endpoint is being given one now (a standby pod claimed for a
// Function at zero, which serves it within milliseconds). A worker pulls
// its sink's events meanwhile, so that they are in hand, waiting for the
// sink as events pulled before a sink went away do, and delivered the
// moment it is ready, not a pull's round trip after it. Ready's channel
// is closed when a wake starts and when it ends.
type Waking interface {
	Waking(namespace, service string) bool
}
