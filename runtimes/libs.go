package runtimes

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

//go:embed nodejs/libs/package.json
var nodeLibsPackage string

// NodeLibraries returns the package.json of the libraries Kyma's Node.js
// runtime images provide to handlers that do not declare them (axios,
// cloudevents, express, @opentelemetry/api): what a runtime image installs
// at ImageNodeLibsDir and kfn dev installs (package deps) for a handler
// that names one of them.
func NodeLibraries() string { return nodeLibsPackage }

// NodeLibraryNames returns the package names of NodeLibraries, sorted.
func NodeLibraryNames() []string {
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal([]byte(nodeLibsPackage), &pkg); err != nil {
		panic(fmt.Sprintf("embedded nodejs/libs/package.json: %v", err))
	}
	names := make([]string, 0, len(pkg.Dependencies))
	for n := range pkg.Dependencies {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// MentionsNodeLibrary reports whether a handler's source names one of
// NodeLibraries as a module, in quotes ("axios", 'express/lib/router',
// `cloudevents`): whether kfn dev must provide them before it starts the
// function. It may say yes for a mention in a comment; it never misses a
// require or an import.
func MentionsNodeLibrary(source string) bool {
	for _, name := range NodeLibraryNames() {
		for _, q := range []string{`"`, `'`, "`"} {
			if strings.Contains(source, q+name+q) || strings.Contains(source, q+name+"/") {
				return true
			}
		}
	}
	return false
}
