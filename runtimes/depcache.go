package runtimes

// DependencyWriterHeader is the request header in which the dependency
// cache client sends the install step's writer token
// (EnvDependencyWriterTokenFile) with a PUT, beside the identity token in
// Authorization.
const DependencyWriterHeader = "Kfn-Dependency-Writer"

// dependencyWriterAudiencePrefix starts every writer token's audience.
const dependencyWriterAudiencePrefix = "kfn-depcache/"

// DependencyWriterAudience is the audience of the writer token that may
// store the dependency set hash of runtime in the dependency cache, and no
// other: "kfn-depcache/<runtime>/<hash>". The controller asks the kubelet
// for a token of this audience for the install container of a Function
// whose dependencies have that hash, and the cache accepts a PUT of
// <runtime>/<hash> only with a token the API server confirms was made for
// it, so a token is bound to the one dependency set its pod installs. The
// API server and kfn's other listeners refuse such a token.
func DependencyWriterAudience(runtime, hash string) string {
	return dependencyWriterAudiencePrefix + runtime + "/" + hash
}

// Lines a Function's pod leaves as a container's termination message, by
// which the controller learns whether the dependency cache holds the pod's
// dependency set (<runtime>/<hash> follows each):
//
//   - DependencyCachedMessage, written by the install init container when
//     it took the set from the cache or stored it there: the Function's
//     next pods may fetch it when their host starts (EnvDependencyHash);
//   - DependencyMissingMessage, the last line of a host that was to fetch
//     its set at start and found none (it exits DependencyMissingExit):
//     the Function's pods go back to installing.
//
// A tenant's install may write either (a package's install script can
// write the termination log); neither lets a pod have more than its own
// Function's set, which the cache gives only to its namespace.
const (
	DependencyCachedMessage  = "kfn: dependency set in the cache: "
	DependencyMissingMessage = "kfn: dependency set not in the cache: "
)

// DependencyMissingExit is the exit code of a host whose dependency set,
// to be fetched at start, is not in the cache.
const DependencyMissingExit = 3

// DependencySet is how the termination messages name a dependency set:
// <runtime>/<hash>.
func DependencySet(runtime, hash string) string { return runtime + "/" + hash }
