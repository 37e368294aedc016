// Package endpoints knows, from the cluster's EndpointSlices, whether a
// Service has a ready endpoint, and tells the dispatcher the moment that
// changes; it is the Kubernetes implementation of dispatcher.Endpoints, and
// tells the gateway which Services are kfn Functions'.
package endpoints
