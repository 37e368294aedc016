// Package manager runs kfn's Function controller as one process: the
// reconciler of package controller/function in a controller-runtime
// manager, with leader election, /healthz and /readyz, Prometheus metrics
// and kfn's log layout. Config holds every setting with working defaults,
// RegisterFlags documents each one as a flag and Load reads the YAML
// config file under the flags given; Run runs until its context ends.
package manager
