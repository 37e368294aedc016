package runtimes

import (
	"errors"
	"fmt"
	"path/filepath"
)

// ErrUnknownRuntime is returned by Lookup for a name that is not in the catalog.
var ErrUnknownRuntime = errors.New("unknown runtime")

// Language is the programming language a runtime's handlers are written in.
type Language string

// The languages of the catalog.
const (
	NodeJS Language = "nodejs"
	Python Language = "python"
)

// Runtime is one entry of the catalog: the value of a Function's
// spec.runtime and how its host is run.
type Runtime struct {
	// Name is the spec.runtime value, for example "nodejs22".
	Name string
	// Language is the language of the handlers it runs.
	Language Language
	// Version is the interpreter version its image ships, for example "22" or "3.12".
	Version string
	// Interpreter is the executable that runs the host, looked up in PATH:
	// "node" or "python3".
	Interpreter string
	// Deprecated runtimes run but are reported as deprecated: those of
	// Kyma's deprecation schedule (api/serverless/v1alpha2 Runtime.Deprecated).
	Deprecated bool
	// API is the handler contract the runtime's handlers are written
	// against: EventAPI (main(event, context)) or RequestAPI (Kyma's newer
	// runtimes: main(req, res) in Node.js, main() with Flask's request in
	// Python, and the sdk module).
	API HandlerAPI
}

// HandlerAPI is a handler contract of Kyma's runtimes (runtimes/README.md).
type HandlerAPI string

// The handler contracts.
const (
	// EventAPI is main(event, context): the handler gets the event's data,
	// its ce-* attributes, the request and response in event.extensions and
	// emitCloudEvent on the event; its return value is the answer.
	EventAPI HandlerAPI = "event"
	// RequestAPI is Kyma's newer contract (nodejs26, python314): Node.js
	// handlers are main(req, res) with Express's request and response and
	// write the answer themselves; Python handlers are main() with Flask's
	// request and return a Flask answer; both import the sdk module for
	// CloudEvents, tracing and the function's metadata.
	RequestAPI HandlerAPI = "request"
)

var catalog = []Runtime{
	{Name: "nodejs20", Language: NodeJS, Version: "20", Interpreter: "node", Deprecated: true, API: EventAPI},
	{Name: "nodejs22", Language: NodeJS, Version: "22", Interpreter: "node", Deprecated: true, API: EventAPI},
	{Name: "nodejs24", Language: NodeJS, Version: "24", Interpreter: "node", API: EventAPI},
	{Name: "nodejs26", Language: NodeJS, Version: "26", Interpreter: "node", API: RequestAPI},
	{Name: "python312", Language: Python, Version: "3.12", Interpreter: "python3", Deprecated: true, API: EventAPI},
	{Name: "python314", Language: Python, Version: "3.14", Interpreter: "python3", API: RequestAPI},
}

// All returns every runtime of the catalog, deprecated ones included, in a
// fixed order. The slice is a copy; changing it changes nothing here.
func All() []Runtime {
	return append([]Runtime(nil), catalog...)
}

// Lookup returns the runtime called name. For a name that is not in the
// catalog it returns an error that wraps ErrUnknownRuntime and lists the
// known names.
func Lookup(name string) (Runtime, error) {
	for _, r := range catalog {
		if r.Name == name {
			return r, nil
		}
	}
	names := make([]string, len(catalog))
	for i, r := range catalog {
		names[i] = r.Name
	}
	return Runtime{}, fmt.Errorf("%w %q: want one of %v", ErrUnknownRuntime, name, names)
}

// Command returns the argv, interpreter first, that starts r's host from a
// host directory: ImageHostDir inside a runtime image, or the directory
// WriteHost returned. The host finds everything else in its environment
// (see Env).
func (r Runtime) Command(hostDir string) []string {
	if r.Language == Python {
		// -u: unbuffered stdout/stderr, so function logs appear at once.
		return []string{r.Interpreter, "-u", filepath.Join(hostDir, "python", "kfn_main.py")}
	}
	return []string{r.Interpreter, filepath.Join(hostDir, "nodejs", "server.cjs")}
}

// ImageEnv is the environment r's image sets (its Dockerfile's ENV) that a
// handler can observe, for a host run outside the image (kfn dev) to have
// it too: NODE_ENV empty for the Node.js runtimes, as in Kyma's images
// (their Dockerfiles' NODE_ENV build argument, never given). Env's
// variables and a Function's own env come after it and win.
func (r Runtime) ImageEnv() []EnvVar {
	if r.Language == NodeJS {
		return []EnvVar{{Name: "NODE_ENV", Value: ""}}
	}
	return nil
}

// DependencyCacheCommand returns the argv, interpreter first, of r's
// dependency cache client in a host directory (ImageHostDir in a runtime
// image): "fetch" and "store" are its commands (runtimes/README.md,
// "Dependency cache").
func (r Runtime) DependencyCacheCommand(hostDir string) []string {
	if r.Language == Python {
		return []string{r.Interpreter, filepath.Join(hostDir, "python", "kfnhost", "depcache.py")}
	}
	return []string{r.Interpreter, filepath.Join(hostDir, "nodejs", "depcache.cjs")}
}

// DepsLibDir returns the directory inside an installed dependency directory
// (as made by package deps) that holds the libraries: node_modules for
// Node.js, site-packages for Python. It is what NODE_PATH or PYTHONPATH is
// set to.
func (r Runtime) DepsLibDir(depsDir string) string {
	if r.Language == Python {
		return filepath.Join(depsDir, "site-packages")
	}
	return filepath.Join(depsDir, "node_modules")
}

// DepsFile returns the name of the file that lists a function's
// dependencies for r: package.json or requirements.txt.
func (r Runtime) DepsFile() string {
	if r.Language == Python {
		return "requirements.txt"
	}
	return "package.json"
}

// SourceFile returns the file name under which the function's source is
// written into the function directory for the default module name:
// handler.js or handler.py.
func (r Runtime) SourceFile() string {
	if r.Language == Python {
		return DefaultModule + ".py"
	}
	return DefaultModule + ".js"
}

// FunctionDir returns the function's directory in a pod of r, Kyma's:
// PodPythonFunctionDir for python312, PodFunctionDir for the others
// (python314 included, as Kyma moves it there). It is an emptyDir the
// source is copied into, so the function may write next to its files,
// and the host's working directory.
func (r Runtime) FunctionDir() string {
	if r.Language == Python && r.API == EventAPI {
		return PodPythonFunctionDir
	}
	return PodFunctionDir
}
