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
