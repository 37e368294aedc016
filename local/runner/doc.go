// Package runner runs `kfn dev`'s Functions as local processes from their
// Plan, the same plan the controller builds a Deployment from: the
// function's files are written to a content-addressed directory, its
// dependencies come from the shared install cache, env valueFrom reads the
// project's ConfigMaps and Secrets, and each function's processes live in a
// supervisor pool. Each function is installed and started by an operation
// of its own, in the background, so that one whose install or start is
// slow, hangs or fails delays no other (Runner.Apply).
package runner
