// Package pool is the warm pool of Function pods: per namespace and shape
// of Function, it keeps standby pods running
// (runtimes' standby hosts: the Function's image, probes, resources and
// security contexts, no source), and when such a Function's
// first event or request arrives (Claim, which the controller's leader
// serves to the event bridge on package contract/claim's port, Handler),
// or its Deployment is scaled up from zero, whichever comes first, it
// gives one of them the Function (POST /_kfn/specialize with its source
// and environment), answers the claim with the pod's address as soon as
// its host serves the Function, and labels it as the Function's pod 50 ms
// behind that (once the first deliveries reached it: the patch and the
// watchers it wakes would take the node's CPU from them), so that its
// Service, and the event bridge's early probe, reach it too, before the
// Deployment's own pod has even been scheduled. Every
// claim of a Function, from any caller, is given the same pod until it is
// retired. The pod serves that Function only (its host refuses a second
// one), in the Function's namespace, and is deleted once the Deployment
// has a ready pod of its own or is scaled back to zero (or is still at
// zero Config.ClaimHold after the claim); the pool is refilled meanwhile.
//
// Bursts are served the same way: when a Function's Deployment is scaled
// up (from zero or from a few replicas), the pool gives it a standby pod
// for each replica it wants and has not made ready, as many as it has
// started, and deletes one for each of the Deployment's own pods that
// becomes ready, until the Deployment serves alone. A Function that does
// not scale to zero (minReplicas >= 1) has its bursts served so, never a
// claim, and its pool keeps standby pods only once it scaled up (its
// gives count as wakes).
//
// Each pool is sized to what it woke recently (demand): as many standby
// pods as the most wakes it saw in one minute of the last Config.Window,
// at least one from the moment a Function joins it, at most Config.Size;
// none once its Functions have neither woken nor joined it for
// Config.Idle. A namespace's AnnotationSize fixes its pools' size
// instead. All pools together keep at most Config.MaxStandby pods: past
// it, every namespace gets its first pod before any gets a second (and
// within one, every pool of it), those that woke last first, so that a
// namespace spreading its Functions over many shapes takes no more.
//
// Two Functions share a shape when their standby pods would be the same
// pod (same image, command, probes, resources, security contexts and
// start environment; a Function's dependencies are not part of it). A
// Function with inline dependencies is served when a dependency cache is
// configured: its standby host fetches them from the cache into the pod's
// dependencies volume before loading it; when the cache does not hold them
// yet, the specialize request fails, the pool deletes that pod, the
// Function wakes on the Deployment path (whose install stores them) and
// ClaimFailure says why. A Function the pool cannot serve exactly wakes on
// the Deployment path: a Git source, dependencies without a dependency
// cache, Secrets mounted as files, a ServiceAccount token, an environment
// variable taken from a Secret, ConfigMap or field, or a variable the host
// reads only at start (NODE_OPTIONS, PYTHONPATH, PYTHONHOME). Observe says
// why.
//
// The pool runs in the controller's leader. A standby pod's token is
// derived from a key the process makes at start and never stores: a new
// leader deletes the standby pods it finds and makes its own. The pool
// knows its pods by the UID the API server gave each when it made it,
// never by name: a tenant who deletes one and makes another of the same
// name (its spec and token hash copied) gets nothing.
package pool
