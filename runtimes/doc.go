// Package runtimes is the catalog of function runtimes and how to start their
// hosts.
//
// A runtime (nodejs22, python312, ...) is served by a host: a small program
// of ours, shipped as files embedded in this package (Node.js: Node's http
// module only; Python: the standard library only), that loads the user's
// handler from a directory and serves Kyma's handler contract over HTTP. The
// controller runs the host baked into a runtime image (at [ImageHostDir]);
// local mode writes the embedded files with [WriteHost] and runs them with the
// interpreter on the machine. Both build the process from the same three
// things: [Runtime.Command], [Runtime.Env] and the directory layout described
// in runtimes/README.md.
package runtimes
