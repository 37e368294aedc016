package project

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"text/template"

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

// A Scaffold is a set of files a new function starts from: the templates
// under scaffold/<scaffold>/, those of the function's handler API in
// scaffold/<scaffold>/<api>/ and those common to all in the folder itself.
type Scaffold string

const (
	// KymaScaffold is what Kyma's CLI writes (kyma function init): a
	// hello-world handler and its empty dependencies.
	KymaScaffold Scaffold = "kyma"
	// FolderScaffold is a function folder 'kfn dev' runs (kfn init): a
	// handler that greets (GREETING) and logs the events it gets, its
	// dependencies, and its config.yaml: the Function in its namespace,
	// scaling from zero to three processes on events, and a Subscription
	// delivering '<name>.requested.v1' events from source 'kfn' to it.
	// config.yaml is text rather than an encoded FolderConfig so that it
	// keeps its comments and order; the tests read it back with
	// ReadFolder's strict decoding.
	FolderScaffold Scaffold = "folder"
)

//go:embed scaffold
var scaffolds embed.FS

// handlerAPI names the handler API of rt, a folder of each scaffold:
// main(event, context), or Kyma's newer API (nodejs26: Express's request
// and response; python314: flask's request).
func handlerAPI(rt serverlessv1alpha2.Runtime) string {
	switch {
	case rt == serverlessv1alpha2.NodeJS26:
		return "nodejs26"
	case rt == serverlessv1alpha2.Python314:
		return "python314"
	case rt.IsPython():
		return "python"
	}
	return "nodejs"
}

// Files returns the files of a new function name in namespace on runtime
// rt, as s writes them: their contents by file name.
func (s Scaffold) Files(name, namespace string, rt serverlessv1alpha2.Runtime) (map[string]string, error) {
	data := struct {
		Name, Namespace string
		Runtime         serverlessv1alpha2.Runtime
	}{name, namespace, rt}
	files := map[string]string{}
	for _, dir := range []string{path.Join("scaffold", string(s)), path.Join("scaffold", string(s), handlerAPI(rt))} {
		entries, err := scaffolds.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("scaffold %s: %w", s, err)
		}
		for _, e := range entries {
			if e.IsDir() {
				continue
			}
			text, err := fs.ReadFile(scaffolds, path.Join(dir, e.Name()))
			if err != nil {
				return nil, err
			}
			t, err := template.New(e.Name()).Parse(string(text))
			if err != nil {
				return nil, fmt.Errorf("scaffold %s: %w", s, err)
			}
			var b bytes.Buffer
			if err := t.Execute(&b, data); err != nil {
				return nil, fmt.Errorf("scaffold %s: %w", s, err)
			}
			files[e.Name()] = b.String()
		}
	}
	return files, nil
}
