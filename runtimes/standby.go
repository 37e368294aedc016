package runtimes

import (
	"crypto/sha256"
	"encoding/hex"
)

// Standby hosts: a host started with EnvStandbyTokenSHA256 serves no
// Function until a caller holding the token POSTs a Specialization to
// SpecializePath; it then loads that Function and is its host for good (a
// second specialize request is the Function's own request, like any other
// path). Until then HealthPath answers 200 "standby", ReadyPath 503, and
// every other request 503. runtimes/README.md ("Standby hosts") has the
// whole contract.
const (
	// EnvStandbyTokenSHA256 is the hex SHA-256 of the bearer token a
	// specialize request must carry; set, the host starts on standby. Only
	// the hash is in the pod: whoever reads the pod learns nothing that
	// specializes it.
	EnvStandbyTokenSHA256 = "KFN_STANDBY_TOKEN_SHA256"
	// SpecializePath is the path of the specialize request (POST, JSON
	// body: a Specialization, bearer token in Authorization).
	SpecializePath = "/_kfn/specialize"
	// MaxSpecializeBytes bounds a specialize request's body; larger are
	// answered 413.
	MaxSpecializeBytes = 4 << 20
	// FunctionHeader names the Function a host serves (namespace/name) on
	// its health answers and on the answer to the specialize request that
	// loaded it.
	FunctionHeader = "X-Kfn-Function"
	// PreparePath is the path of the prepare request (POST, JSON body: a
	// Preparation, bearer token in Authorization).
	PreparePath = "/_kfn/prepare"
	// MaxPrepareBytes bounds a prepare request's body; larger are answered
	// 413.
	MaxPrepareBytes = 64 << 10
)

// Preparation is the body of a prepare request, which a standby host takes
// once, before any specialize request: it GETs the dependency set
// Dependencies names from its KFN_DEPENDENCY_CACHE (given in Env) and
// unpacks it into KFN_DEPS_DIR (given in Env), as a Specialization's
// Dependencies would be, and answers 200 once they are there. A later
// specialize request whose Dependencies and KFN_DEPS_DIR are the same
// unpacks nothing; one with other dependencies has the directory cleared
// first. Refused: as a Specialization's environment and dependencies are
// (400), no Dependencies (400), a host that prepared (or was given a
// Function) already (409); a set the cache does not hold is answered 404,
// and any other failure 500: either leaves nothing prepared, and may be
// asked again. A specialize request that arrives while the prepare request
// fetches waits for it.
type Preparation struct {
	Env          map[string]string           `json:"env,omitempty"`
	Dependencies *SpecializationDependencies `json:"dependencies"`
}

// Specialization is the body of a specialize request: the Function's
// environment (as Env would give its Deployment, less the variables fixed
// when the host starts: EnvPort, EnvHandlerAPI, EnvListenFD,
// EnvFunctionDir, EnvSourceDir, EnvStandbyTokenSHA256, NODE_OPTIONS,
// PYTHONPATH, PYTHONHOME) and its files (plain names, no directories),
// written into the host's EnvFunctionDir before the handler is loaded.
// Refused (400, the host stays on standby): more than 512 variables or 64
// files, a name that is not a variable or plain file name, a fixed
// variable, no file, or a configuration the host refuses (an invalid
// FUNC_TIMEOUT, say).
//
// Dependencies, when set, names the Function's installed dependencies in
// the dependency cache: the host GETs them from its KFN_DEPENDENCY_CACHE
// (given in Env) with the pod's identity token (EnvIdentityTokenFile) and
// unpacks them into KFN_DEPS_DIR (given in Env; writable in a standby
// pod) before it loads the handler, with them resolvable as in a
// Deployment's pod. Refused (400, the host stays on standby): another
// runtime than the host's, no cache or dependency directory in the
// environment, a hash that is not 64 lower-case hex digits. When the cache
// does not hold them (404), cannot be reached or holds an archive that
// reaches outside the directory, the request fails (500) after the files
// were written and the host serves no Function from then on (409 to any
// later specialize request).
type Specialization struct {
	Env          map[string]string           `json:"env,omitempty"`
	Files        map[string]string           `json:"files"`
	Dependencies *SpecializationDependencies `json:"dependencies,omitempty"`
}

// SpecializationDependencies names a dependency set in the dependency
// cache: <KFN_DEPENDENCY_CACHE>/<Runtime>/<Hash>.
type SpecializationDependencies struct {
	// Runtime is the runtime name (nodejs22, python312, ...), the host's.
	Runtime string `json:"runtime"`
	// Hash is the plan's dependency hash: 64 lower-case hex digits.
	Hash string `json:"hash"`
}

// StandbyTokenHash is the value of EnvStandbyTokenSHA256 for token.
func StandbyTokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
