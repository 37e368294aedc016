// Package manifest reads Function and Subscription manifests (YAML or JSON,
// several documents per file) and defaults and validates them with kfn's
// generated CRDs exactly as the API server does, so `kfn dev`, which has no
// API server, refuses the same manifests with the same messages as a cluster.
package manifest
