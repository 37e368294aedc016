// Package controller runs kfn's Function controller as one process: the
// reconciler of package controller/function in a controller-runtime
// manager, with leader election, /healthz and /readyz, Prometheus metrics
// and kfn's log layout. Process holds every setting with working defaults
// (DefaultProcess), RegisterFlags documents each one as a flag and Load
// reads the YAML config file under the flags given; Run runs until its
// context ends. It is named as the other components' processes are:
// eventbridge.Run and scaler.Run, each beside its DefaultProcess.
package controller
