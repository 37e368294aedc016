package project

import (
	"fmt"

	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
)

// DefaultFiles returns the names of the handler and the dependencies file
// a function folder of rt has when its config.yaml names none:
// handler.js and package.json for Node.js, handler.py and
// requirements.txt for Python. (A Node.js folder without handler.js may
// have handler.mjs instead.)
func DefaultFiles(rt serverlessv1alpha2.Runtime) (handler, deps string) {
	if rt.IsPython() {
		return "handler.py", "requirements.txt"
	}
	return "handler.js", "package.json"
}

// NewConfig returns the config.yaml of a new function folder, as 'kfn
// init' writes it: the Function name in namespace with runtime rt and an
// inline source, scaling from zero to three processes on events, one
// environment variable (GREETING), and a Subscription delivering
// '<name>.requested.v1' events from source 'kfn' to it. It is text rather
// than an encoded FolderConfig so that it keeps its comments and order;
// the tests read it back with ReadFolder's strict decoding.
func NewConfig(name, namespace string, rt serverlessv1alpha2.Runtime) []byte {
	return fmt.Appendf(nil, `# A Kyma-CLI-style function folder, run by 'kfn dev'.
name: %[1]s
namespace: %[2]s
runtime: %[3]s
source:
  sourceType: inline
# Scale from zero on events, up to 3 processes (remove to run one process always).
scaleConfig:
  minReplicas: 0
  maxReplicas: 3
env:
  - name: GREETING
    value: Hello
# Events of these types from this source are delivered to the function.
subscriptions:
  - name: %[1]s
    source: kfn
    types:
      - %[1]s.requested.v1
schemaVersion: v1
`, name, namespace, rt)
}
