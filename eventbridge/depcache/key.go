package depcache

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
)

// PathPrefix starts every route of the cache.
const PathPrefix = "/_kfn/dependencies/"

// WriterHeader is the request header in which a PUT carries the install
// step's writer token, beside the identity token in Authorization. The
// runtimes' cache clients send it under this name
// (runtimes.DependencyWriterHeader; test/depcachetest holds the two equal).
const WriterHeader = "Kfn-Dependency-Writer"

// WriterAudience is the audience of the one writer token that may store
// the dependency set hash of runtime: "kfn-depcache/<runtime>/<hash>",
// the audience the controller asks the kubelet for in the install
// container (runtimes.DependencyWriterAudience; test/depcachetest holds
// the two equal). The API server and kfn's other listeners refuse it.
func WriterAudience(runtime, hash string) string {
	return "kfn-depcache/" + runtime + "/" + hash
}

// hashLength is the length of a dependency hash: a hex SHA-256
// (runtimes/plan Dependencies.Hash).
const hashLength = 64

// errBadKey is wrapped by parseKey's errors (answered 400).
var errBadKey = errors.New("bad dependency key")

// key is one object of the cache: a namespace's installed dependencies of
// a runtime and hash.
type key struct {
	namespace, runtime, hash string
}

// name is the object's name in the bucket: <namespace>/<runtime>/<hash>.
func (k key) name() string { return k.namespace + "/" + k.runtime + "/" + k.hash }

// parseKey reads {runtime}/{hash} from a request's escaped path (so that
// an escaped slash or dot is seen as sent): exactly two segments after
// PathPrefix, a runtime of the Function API and 64 lowercase hex digits.
func parseKey(escapedPath string) (runtime, hash string, err error) {
	rest, ok := strings.CutPrefix(escapedPath, PathPrefix)
	if !ok {
		return "", "", fmt.Errorf("%w: the path must start with %s", errBadKey, PathPrefix)
	}
	runtime, hash, ok = strings.Cut(rest, "/")
	if !ok || strings.Contains(hash, "/") {
		return "", "", fmt.Errorf("%w: want %s{runtime}/{hash}", errBadKey, PathPrefix)
	}
	if !slices.Contains(v1alpha2.Runtimes, v1alpha2.Runtime(runtime)) {
		return "", "", fmt.Errorf("%w: unknown runtime %q (want one of %v)", errBadKey, runtime, v1alpha2.Runtimes)
	}
	if !isHash(hash) {
		return "", "", fmt.Errorf("%w: the hash must be %d lowercase hex digits", errBadKey, hashLength)
	}
	return runtime, hash, nil
}

// isHash reports whether s is a dependency hash: hashLength lowercase hex
// digits.
func isHash(s string) bool {
	if len(s) != hashLength {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
