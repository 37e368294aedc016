// Package claim is the contract of the warm pool's claims, from the event
// bridge to the controller's leader: the first event or request for a
// Function at zero claims a standby pod for it at once ([Client.Claim]),
// and is delivered to the pod's address as soon as its host serves the
// Function, while Kubernetes (labels, the Deployment, EndpointSlices)
// catches up behind it.
//
// The request is POST [Path] of the Function's namespace and name, with
// a bearer token of the caller's ServiceAccount for kfn's audience; the
// controller authenticates it (TokenReview) and authorizes it (create on
// functions/claim in the Function's namespace, which the chart grants the
// event bridge only). The answer is an [Answer] (200), or a status that
// [Client.Claim] turns into one of its errors: 404 [ErrNotPooled], 409
// [ErrServed], 503 [ErrNoStandby]. Only the leader listens (the pool runs
// there): the Client tries each address of the controller's headless
// Service and keeps the one that answered.
package claim
