package host

import "time"

// Port is the TCP port a function's host listens on in a pod.
const Port = 8080

// HTTP paths the host serves itself; every other path goes to the handler.
const (
	// HealthPath answers 200 while the host serves (503 while draining),
	// whether or not the handler could be loaded, as in Kyma: the startup
	// and liveness probe. The host listens only once it tried to load the
	// handler.
	HealthPath = "/healthz"
	// ReadyPath answers 200 once the handler is loaded, 500 "User function
	// not loaded: <reason>" when it could not be loaded, 503 while
	// draining: the readiness probe. (A query on /healthz takes no path away
	// from the handler.)
	ReadyPath = HealthPath + "?ready"
)

// MaxStartup is how long a host may take to load its handler before the
// startup probe gives up and the container is restarted: Kyma's bound
// (its startup probe allows 30 failures 5 s apart).
const MaxStartup = 150 * time.Second
