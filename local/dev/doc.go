// Package dev is `kfn dev`: the whole kfn platform for one project
// directory in one process, without Kubernetes. An embedded NATS JetStream
// server (its store under the project's .kfn directory) holds the events;
// the event bridge's publisher, dispatcher and dead-letter admin run on one
// port with the gateway and an admin API; the scaler runs in-process and is
// driven over gRPC by a local autoscaler exactly as KEDA drives it; and each
// Function runs as local processes from the same plan as in a cluster.
// Sink URLs such as http://orders.default.svc.cluster.local resolve to those
// processes. Edits to the project are picked up and applied without
// dropping requests. A live web view (package webview, at ViewPath) shows
// the functions, Subscriptions, dead letters and the path of recent events
// (package eventpath).
package dev
