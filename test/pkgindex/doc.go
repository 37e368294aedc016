// Package pkgindex serves one package, kfn-greet 1.0.0, to npm and to pip
// in tests and benchmarks, so that a dependency install runs the real
// package managers without the public registries (which a real node's
// pods cannot reach): a private npm registry (bearer token) and a PEP 503
// simple index with a built pure-Python wheel (basic auth), on one
// listener. It counts the requests for each package, so that a test can
// show that an install asked it, or that a wake did not.
//
// The package's code: Node.js require("kfn-greet").greet(who) and Python
// kfn_greet.greet(who) return "Hi <who> from kfn-greet".
package pkgindex
