package runtimes

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kfn-dev/kfn/contract/host"
)

// Environment variables a host reads. Kyma's names are used where Kyma has
// one; the KFN_ ones are ours. runtimes/README.md documents each.
const (
	// EnvFunctionName is the Function's name (context "function-name").
	EnvFunctionName = "FUNC_NAME"
	// EnvRuntime is the runtime name, for example "nodejs22" (context "runtime").
	EnvRuntime = "FUNC_RUNTIME"
	// EnvNamespace is the Function's namespace (context "namespace").
	EnvNamespace = "SERVICE_NAMESPACE"
	// EnvTimeout is the handler timeout in seconds, fractions allowed; a call
	// that takes longer is answered 408.
	EnvTimeout = "FUNC_TIMEOUT"
	// EnvBodyLimitMB is the Node.js host's request body limit in MiB
	// (Kyma's variable and unit); a larger body is answered 413.
	EnvBodyLimitMB = "REQ_MB_LIMIT"
	// EnvBodyLimitBytes is the Python host's request body limit in bytes
	// (Kyma's variable and unit, bottle's MEMFILE_MAX); a larger body is
	// answered 413.
	EnvBodyLimitBytes = "FUNC_MEMFILE_MAX"
	// EnvBodyLimit is the request body limit in MiB of the RequestAPI
	// runtimes (nodejs26, python314: Kyma's newer name and unit; Kyma's
	// "MB" are MiB, as body-parser and Flask count them); a larger body is
	// answered 413. sdk.getBodySizeLimit reports it.
	EnvBodyLimit = "FUNC_BODY_MB_LIMIT"
	// EnvHandlerAPI is the handler contract the host serves: "event"
	// (EventAPI) or "request" (RequestAPI).
	EnvHandlerAPI = "KFN_HANDLER_API"
	// EnvPort is the TCP port the host listens on (all interfaces).
	EnvPort = "FUNC_PORT"
	// EnvHandler is the name of the handler function in the module, for
	// the EventAPI runtimes (Kyma's python312 name; nodejs20-24 read it in
	// kfn's host only).
	EnvHandler = "FUNC_HANDLER"
	// EnvModule is the module name: the file <EnvModule>.js/.mjs/.cjs or
	// <EnvModule>.py in the function directory, for the EventAPI runtimes.
	EnvModule = "MOD_NAME"
	// EnvHandlerFunc is EnvHandler's name for the RequestAPI runtimes
	// (Kyma's newer runtimes renamed it).
	EnvHandlerFunc = "HANDLER_FUNC_NAME"
	// EnvHandlerModule is EnvModule's name for the RequestAPI runtimes.
	EnvHandlerModule = "HANDLER_MOD_NAME"
	// EnvHandlerPath is, for the RequestAPI runtimes, the function's
	// directory, where the handler module is (Kyma's newer runtimes read
	// the directory from it). The Node.js host of the EventAPI runtimes
	// sets it in its own environment to the module it loaded, as Kyma's
	// older runtimes have it.
	EnvHandlerPath = "HANDLER_PATH"
	// EnvRequestLog turns on a log line per request, in Apache's combined
	// format, on stdout, for the RequestAPI runtimes: any non-empty value,
	// as Kyma's runtimes read it. Set by the user, never by Env.
	EnvRequestLog = "SERVER_INTERNAL_LOGGER"
	// EnvLegacyRequestLog is EnvRequestLog for the EventAPI runtimes
	// (Kyma's older name).
	EnvLegacyRequestLog = "KYMA_INTERNAL_LOGGER_ENABLED"
	// EnvPublisherAddress is the URL emitCloudEvent POSTs events to.
	EnvPublisherAddress = "PUBLISHER_PROXY_ADDRESS"
	// EnvDependencyCache is the base URL of the dependency cache
	// (http://<publisher>/_kfn/dependencies): the install init container,
	// and a standby host given a Function with dependencies, GET
	// <base>/<runtime>/<hash> (a gzip-compressed tar of the dependency
	// directory) with the pod's identity token before installing, and the
	// install container PUTs what it installed there. Set only for a
	// Function whose dependencies have a hash; unset, pods install as
	// before. runtimes/README.md ("Dependency cache") has the contract.
	EnvDependencyCache = "KFN_DEPENDENCY_CACHE"
	// EnvDependencyHash, when set with EnvDependencyCache and EnvDepsDir,
	// has a host that is not on standby fetch the Function's dependency set
	// <runtime>/<hash> from the cache into EnvDepsDir before it loads the
	// handler: the controller renders a Function's pods without the install
	// init container once the cache holds their set (a second container
	// start less on a wake). When the cache has no such set the host exits
	// DependencyMissingExit, its last line DependencyMissingMessage.
	EnvDependencyHash = "KFN_DEPENDENCY_HASH"
	// EnvDependencyCacheRetryMS is the cache client program's first wait,
	// in milliseconds (default 1000, doubled each time), before it asks
	// the cache again after an answer that may pass (429, 502, 503, 504,
	// no connection). Nothing sets it in a pod; tests shorten it.
	EnvDependencyCacheRetryMS = "KFN_DEPENDENCY_CACHE_RETRY_MS"
	// EnvDependencyMaxBytes bounds the bytes the cache client unpacks from
	// one object (the tar stream its gzip expands to, headers included):
	// past it the fetch is refused, the directory left empty. The
	// controller sets it in the install container to the dependencies
	// volume's size limit; unset, 1 GiB (its default).
	EnvDependencyMaxBytes = "KFN_DEPENDENCY_MAX_BYTES"
	// EnvTraceCollectorEndpoint is the OTLP/HTTP traces URL; when set and the
	// OpenTelemetry SDK is installed, spans are exported there.
	EnvTraceCollectorEndpoint = "TRACE_COLLECTOR_ENDPOINT"
	// EnvMemoryLimit is passed to Python handlers as context "memory-limit".
	EnvMemoryLimit = "FUNC_MEMORY_LIMIT"
	// EnvNodePath makes a function's installed dependencies resolvable by
	// require() (Node.js).
	EnvNodePath = "NODE_PATH"
	// EnvPythonPath makes a function's installed dependencies importable (Python).
	EnvPythonPath = "PYTHONPATH"
	// EnvFunctionDir is the function's directory: the host loads the handler
	// from it and runs in it (its working directory). It is writable in a
	// pod and in kfn dev (with EnvSourceDir), as Kyma's is.
	EnvFunctionDir = "KFN_FUNCTION_DIR"
	// EnvSourceDir, when set, is a directory whose files the host copies
	// into EnvFunctionDir before it loads the handler: the read-only source
	// (a ConfigMap volume in a pod), copied into a writable directory.
	EnvSourceDir = "KFN_SOURCE_DIR"
	// EnvDepsDir is the directory with the function's installed dependencies
	// (as made by package deps); unset for a function without dependencies.
	// It may be read-only.
	EnvDepsDir = "KFN_DEPS_DIR"
	// EnvLibsDir is the directory of the libraries Kyma's runtime images
	// provide (NodeLibraries; its node_modules): a handler may require them
	// without declaring them, and they resolve after the function's own
	// dependencies (Node.js).
	EnvLibsDir = "KFN_LIBS_DIR"
	// EnvIdentityTokenFile, when set, is a file holding a token of the
	// pod's ServiceAccount for kfn's audience, which the host sends as its
	// bearer token with every event it emits, re-read each time (the
	// kubelet renews it): the publisher learns from it which namespace sent
	// the event. PUBLISHER_TOKEN, when set, then goes beside it in the
	// header auth.TokenHeader (as the bearer token without an identity).
	EnvIdentityTokenFile = "KFN_IDENTITY_TOKEN_FILE"
	// EnvDependencyWriterTokenFile, when set, is a file holding the
	// install step's writer token: a token of the pod's ServiceAccount for
	// the audience DependencyWriterAudience(runtime, hash) only, which the
	// dependency cache client sends (header DependencyWriterHeader) beside
	// the identity token when it stores the dependencies it installed. The
	// controller mounts it in the install init container only, never in the
	// function container, so that neither the Function's code at run time
	// nor any other token of the namespace can store dependencies.
	EnvDependencyWriterTokenFile = "KFN_DEPENDENCY_WRITER_TOKEN_FILE"
	// EnvListenFD, when set, is the number of an inherited file descriptor of
	// a listening TCP socket that the host serves instead of binding EnvPort.
	// Local mode uses it to keep a port across restarts.
	EnvListenFD = "KFN_LISTEN_FD"
)

// Defaults the host applies when a variable is unset.
const (
	DefaultPort    = host.Port
	DefaultTimeout = 180 * time.Second
	// DefaultBodyLimitMB is the Node.js body limit, 1 MiB (Kyma's REQ_MB_LIMIT default).
	DefaultBodyLimitMB = 1
	// DefaultPythonBodyLimit is the Python body limit in bytes, 100 MiB
	// (Kyma's FUNC_MEMFILE_MAX default).
	DefaultPythonBodyLimit = 100 << 20
	// DefaultRequestBodyLimitMB is the body limit of nodejs26 in MiB, and
	// DefaultRequestPythonBodyLimitMB python314's (Kyma's
	// FUNC_BODY_MB_LIMIT defaults).
	DefaultRequestBodyLimitMB       = 1
	DefaultRequestPythonBodyLimitMB = 100
	DefaultHandler                  = "main"
	DefaultModule                   = "handler"
)

// HTTP paths the host serves itself (and GET /metrics, the function's
// Prometheus metrics: runtimes/README.md); every other path goes to the
// handler. Package contract/host defines them.
const (
	// HealthPath is the startup and liveness probe (host.HealthPath).
	HealthPath = host.HealthPath
	// ReadyPath is the readiness probe (host.ReadyPath).
	ReadyPath = host.ReadyPath
)

// Paths inside a runtime image and a function pod.
const (
	// ImageHostDir is where a runtime image holds the host files, laid out as
	// WriteHost writes them.
	ImageHostDir = "/opt/kfn"
	// PodFunctionDir is the function's directory in a Node.js pod (Kyma's),
	// an emptyDir the source is copied into. Runtime.FunctionDir tells
	// which directory a runtime uses.
	PodFunctionDir = "/usr/src/app/function"
	// PodPythonFunctionDir is the function's directory in a Python pod,
	// Kyma's FUNCTION_PATH.
	PodPythonFunctionDir = "/kubeless"
	// PodSourceDir is where the controller mounts an inline Function's
	// source (its ConfigMap, read-only), which the host copies into the
	// function's directory.
	PodSourceDir = "/usr/src/app/source"
	// PodDepsDir is where the controller mounts the installed dependencies.
	PodDepsDir = "/usr/src/app/deps"
	// PodIdentityDir is where the controller mounts the function
	// container's identity token (EnvIdentityTokenFile is its file token).
	PodIdentityDir = "/var/run/secrets/kfn"
	// PodDependencyWriterDir is where the controller mounts the install
	// container's writer token (EnvDependencyWriterTokenFile is its file
	// token).
	PodDependencyWriterDir = "/var/run/secrets/kfn-depcache"
	// NodeModulesDir is the directory, under a host directory, that holds
	// the modules the Node.js host provides to RequestAPI handlers as
	// packages (sdk): NODE_PATH lists it after the function's dependencies.
	NodeModulesDir = "nodejs/modules"
	// ImageNodeLibsDir is where a Node.js runtime image holds the libraries
	// Kyma's images provide (NodeLibraries), as an installed dependency
	// directory.
	ImageNodeLibsDir = "/opt/kfn/nodejs/libs"
)

// bodyLimit returns the variable and value that tell r's host its body
// limit of limit bytes (0: the runtime's default), in Kyma's unit.
func (r Runtime) bodyLimit(limit int64) (string, string) {
	mib := func(def int) string {
		v := float64(def)
		if limit != 0 {
			v = float64(limit) / (1 << 20)
		}
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	switch {
	case r.API == RequestAPI && r.Language == Python:
		return EnvBodyLimit, mib(DefaultRequestPythonBodyLimitMB)
	case r.API == RequestAPI:
		return EnvBodyLimit, mib(DefaultRequestBodyLimitMB)
	case r.Language == Python:
		if limit == 0 {
			limit = DefaultPythonBodyLimit
		}
		return EnvBodyLimitBytes, strconv.FormatInt(limit, 10)
	default:
		return EnvBodyLimitMB, mib(DefaultBodyLimitMB)
	}
}

// ErrInvalidConfig is wrapped by the errors Env returns for a Config it cannot use.
var ErrInvalidConfig = errors.New("invalid host config")

// EnvVar is one environment variable of a host process.
type EnvVar struct {
	Name  string // the variable's name, e.g. FUNC_PORT
	Value string // its value; may be empty
}

// Config is what the platform tells a host about the function it serves.
// Zero values mean the defaults above.
type Config struct {
	// FunctionName and Namespace name the Function (context "function-name"
	// and "namespace").
	FunctionName string
	Namespace    string
	// FunctionDir is the function's directory: the source is there, or
	// copied there from SourceDir. Required.
	FunctionDir string
	// SourceDir, when set, is a directory whose files the host copies into
	// FunctionDir before loading the handler.
	SourceDir string
	// DepsDir is the installed dependency directory; empty when the function
	// has no dependencies.
	DepsDir string
	// LibsDir is the installed directory of NodeLibraries (Node.js only);
	// empty when there is none. They resolve after DepsDir's.
	LibsDir string
	// HostDir is the host directory Runtime.Command is given; empty means
	// ImageHostDir. A Node.js RequestAPI handler resolves the sdk module
	// from it (NodeModulesDir), after its own dependencies and LibsDir.
	HostDir string
	// Port is the port to listen on; 0 means DefaultPort.
	Port int
	// ListenFD, when >= 3, is an inherited listening socket to serve instead of Port.
	ListenFD int
	// Timeout is the handler timeout; 0 means DefaultTimeout.
	Timeout time.Duration
	// BodyLimit is the request body limit in bytes; 0 means the runtime's
	// default (DefaultBodyLimitMB MiB for Node.js, DefaultPythonBodyLimit
	// for Python; for RequestAPI runtimes DefaultRequestBodyLimitMB and
	// DefaultRequestPythonBodyLimitMB MiB). Each gets it in Kyma's
	// variable and unit: Node.js in MiB (REQ_MB_LIMIT), Python in bytes
	// (FUNC_MEMFILE_MAX), RequestAPI runtimes in MiB (FUNC_BODY_MB_LIMIT).
	BodyLimit int64
	// Handler is the name of the handler function; empty means DefaultHandler.
	Handler string
	// Module is the handler's module name; empty means DefaultModule.
	Module string
	// PublisherAddress is the URL for emitCloudEvent.
	PublisherAddress string
	// DependencyCache is the dependency cache's base URL (see
	// EnvDependencyCache); empty: none.
	DependencyCache string
	// DependencyHash, with DependencyCache and DepsDir, has the host fetch
	// its dependency set when it starts (see EnvDependencyHash); empty:
	// the dependencies are installed in DepsDir before the host starts.
	DependencyHash string
	// IdentityTokenFile is the token file emitCloudEvent sends (see
	// EnvIdentityTokenFile); empty: none.
	IdentityTokenFile string
	// TraceCollectorEndpoint is the OTLP/HTTP traces URL; empty disables export.
	TraceCollectorEndpoint string
	// MemoryLimit is shown to Python handlers as context "memory-limit".
	MemoryLimit string
}

// platformEnvNames returns the names of every variable Env may set, sorted.
// A Function's own env must not set these.
func platformEnvNames() []string {
	names := []string{
		EnvFunctionName, EnvRuntime, EnvNamespace, EnvTimeout, EnvBodyLimitMB, EnvBodyLimitBytes, EnvBodyLimit,
		EnvHandlerAPI, EnvPort, EnvHandler, EnvModule, EnvHandlerFunc, EnvHandlerModule, EnvHandlerPath,
		EnvPublisherAddress, EnvTraceCollectorEndpoint, EnvMemoryLimit,
		EnvNodePath, EnvPythonPath, EnvFunctionDir, EnvSourceDir, EnvDepsDir, EnvLibsDir, EnvListenFD,
		EnvIdentityTokenFile, EnvStandbyTokenSHA256, EnvDependencyCache, EnvDependencyHash,
	}
	sort.Strings(names)
	return names
}

// Env returns the environment, sorted by name, that makes r's host serve the
// function described by c. Defaults are written out, so the result fully
// describes the process. It returns an error wrapping ErrInvalidConfig when
// c has no FunctionDir or a negative or out-of-range number.
func (r Runtime) Env(c Config) ([]EnvVar, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	env := map[string]string{
		EnvFunctionName: c.FunctionName,
		EnvRuntime:      r.Name,
		EnvNamespace:    c.Namespace,
		EnvTimeout:      strconv.FormatFloat(cmp.Or(c.Timeout, DefaultTimeout).Seconds(), 'f', -1, 64),
		EnvPort:         strconv.Itoa(cmp.Or(c.Port, DefaultPort)),
		EnvFunctionDir:  c.FunctionDir,
		EnvHandlerAPI:   string(r.API),
	}
	if r.API == RequestAPI {
		// Kyma's newer runtimes' names, as their images read them.
		env[EnvHandlerFunc] = cmp.Or(c.Handler, DefaultHandler)
		env[EnvHandlerModule] = cmp.Or(c.Module, DefaultModule)
		env[EnvHandlerPath] = c.FunctionDir
	} else {
		env[EnvHandler] = cmp.Or(c.Handler, DefaultHandler)
		env[EnvModule] = cmp.Or(c.Module, DefaultModule)
	}
	name, value := r.bodyLimit(c.BodyLimit)
	env[name] = value
	if c.ListenFD != 0 {
		env[EnvListenFD] = strconv.Itoa(c.ListenFD)
	}
	for name, value := range map[string]string{
		EnvSourceDir:              c.SourceDir,
		EnvDepsDir:                c.DepsDir,
		EnvPublisherAddress:       c.PublisherAddress,
		EnvIdentityTokenFile:      c.IdentityTokenFile,
		EnvDependencyCache:        c.DependencyCache,
		EnvDependencyHash:         c.DependencyHash,
		EnvTraceCollectorEndpoint: c.TraceCollectorEndpoint,
		EnvMemoryLimit:            c.MemoryLimit,
	} {
		if value != "" {
			env[name] = value
		}
	}
	r.libraryPath(c, env)
	out := make([]EnvVar, 0, len(env))
	for k, v := range env {
		out = append(out, EnvVar{Name: k, Value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// validate refuses a Config without a function directory or with a
// negative or out-of-range number.
func (c Config) validate() error {
	switch {
	case c.FunctionDir == "":
		return fmt.Errorf("%w: function directory is required", ErrInvalidConfig)
	case c.Port < 0 || c.Port > 65535:
		return fmt.Errorf("%w: port %d out of range", ErrInvalidConfig, c.Port)
	case c.ListenFD != 0 && c.ListenFD < 3:
		return fmt.Errorf("%w: listen fd %d: want >= 3", ErrInvalidConfig, c.ListenFD)
	case c.Timeout < 0:
		return fmt.Errorf("%w: negative timeout %s", ErrInvalidConfig, c.Timeout)
	case c.BodyLimit < 0:
		return fmt.Errorf("%w: negative body limit %d", ErrInvalidConfig, c.BodyLimit)
	}
	return nil
}

// libraryPath sets where the host's interpreter looks for libraries:
// PYTHONPATH to the function's own dependencies for Python; for Node.js,
// NODE_PATH, whose directories require() tries in order: the function's
// own dependencies first, then the libraries Kyma's images provide, then
// (for the request API) the host's sdk module; KFN_LIBS_DIR names the
// libraries' directory.
func (r Runtime) libraryPath(c Config, env map[string]string) {
	if r.Language == Python {
		if c.DepsDir != "" {
			env[EnvPythonPath] = r.DepsLibDir(c.DepsDir)
		}
		return
	}
	var paths []string
	if c.DepsDir != "" {
		paths = append(paths, r.DepsLibDir(c.DepsDir))
	}
	if c.LibsDir != "" {
		env[EnvLibsDir] = c.LibsDir
		paths = append(paths, r.DepsLibDir(c.LibsDir))
	}
	if r.API == RequestAPI {
		paths = append(paths, filepath.Join(cmp.Or(c.HostDir, ImageHostDir), NodeModulesDir))
	}
	if len(paths) > 0 {
		env[EnvNodePath] = strings.Join(paths, ":")
	}
}
