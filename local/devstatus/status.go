package devstatus

import "github.com/kfn-dev/kfn/api/eventing/v1alpha2"

// Status is what `kfn get` shows: every function and Subscription of a
// running kfn dev, or of a cluster's namespace.
type Status struct {
	// Ready is true once the project has been loaded.
	Ready bool `json:"ready"`
	// Addr is where the publisher, gateway and admin API listen.
	Addr string `json:"addr"`
	// NATS is the embedded NATS server's URL.
	NATS string `json:"nats"`
	// Functions are sorted by namespace and name.
	Functions []Function `json:"functions"`
	// Subscriptions are sorted by namespace and name.
	Subscriptions []Subscription `json:"subscriptions"`
	// Errors are the problems of the last load of the project.
	Errors []string `json:"errors,omitempty"`
}

// Function is one function's state.
type Function struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Runtime   string `json:"runtime"`
	// Replicas is how many processes are wanted; Ready how many serve.
	Replicas int `json:"replicas"`
	Ready    int `json:"ready"`
	// Autoscaled functions scale between Min and Max on queue depth.
	Autoscaled bool `json:"autoscaled"`
	Min        int  `json:"min"`
	Max        int  `json:"max"`
	// Backlog is the number of events waiting for the function; InFlight
	// the gateway's requests in flight; Active whether it has work.
	Backlog  uint64 `json:"backlog"`
	InFlight int    `json:"inFlight"`
	Active   bool   `json:"active"`
	// Error is the last failure to start the function, if any.
	Error    string   `json:"error,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
	// Routes are the rules of the APIRules served that reach the
	// function, in the order of their APIRules and rules.
	Routes []Route `json:"routes,omitempty"`
}

// Route is one rule of an APIRule that reaches a function from outside:
// on its hosts, the methods and path it serves, as its access strategy
// lets callers.
type Route struct {
	// APIRule is "namespace/name".
	APIRule string   `json:"apiRule"`
	Hosts   []string `json:"hosts"`
	Path    string   `json:"path"`
	Methods []string `json:"methods"`
	// Access is the rule's access strategy: noAuth, jwt or extAuth.
	Access string `json:"access"`
	// Refused says why the rule refuses every request, when it does.
	Refused string `json:"refused,omitempty"`
}

// Subscription is one Subscription's state and delivery counts.
type Subscription struct {
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Sink      string   `json:"sink"`
	Source    string   `json:"source"`
	Types     []string `json:"types"`
	// CleanTypes are the types with their cleaned forms, what a cluster's
	// Subscription has in status.types.
	CleanTypes []v1alpha2.EventType `json:"cleanTypes"`
	Ready      bool                 `json:"ready"`
	// Backlog is the number of events waiting for the Subscription:
	// pending and unacknowledged in its consumer.
	Backlog      uint64 `json:"backlog"`
	Delivered    uint64 `json:"delivered"`
	Failed       uint64 `json:"failed"`
	DeadLettered uint64 `json:"deadLettered"`
}
