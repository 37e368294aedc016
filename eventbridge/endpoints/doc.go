// Package endpoints knows, from the cluster's EndpointSlices, whether a
// Service has a ready endpoint, and tells the dispatcher the moment that
// changes; it is the Kubernetes implementation of dispatcher.Endpoints, and
// tells the gateway which Services are kfn Functions'. It also names the
// ready endpoints themselves, so that the dispatcher and the gateway send
// each request to the next pod directly, as Knative's activator does, and
// asks a Function's starting pods whether their handler is loaded, so that
// a pod woken from zero is reached before the kubelet marks it ready. With
// a Claimer (WithClaimer), the first event or request for a Function at
// zero (Wake) claims a standby pod of the warm pool for it, and the pod's
// address is a ready endpoint from the claim's answer on, before any
// EndpointSlice lists it.
package endpoints
