// Package plan computes, as plain data, everything needed to run one
// Function: runtime, image, argv, environment, port, probes, resources,
// source files, dependency set, secret mounts, labels, security contexts,
// scaling range and who owns the replica count ([Plan.SetAutoscaler]).
//
// A Plan has no Kubernetes client and no controller-runtime dependency: the
// controller turns it into a Deployment (package controller/resources) and
// local mode (kfn dev) turns the same Plan into local processes, so the two
// can never disagree about how a Function runs. [For] is a pure function of
// the Function and a [Config]; it performs no I/O.
package plan
