package layers_test

import (
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/kfn-dev/kfn/"

// mayImport says, for each top-level folder of product code, which
// folders its non-test code may import. A folder not listed (bench, e2e,
// hack, test) may import anything; nothing in this list may import them.
var mayImport = map[string][]string{
	"api":         {"api"},
	"contract":    {"contract", "api"},
	"runtimes":    {"runtimes", "api", "contract"},
	"internal":    {"internal", "api", "contract"},
	"controller":  {"controller", "api", "contract", "runtimes", "internal"},
	"eventbridge": {"eventbridge", "api", "contract", "internal"},
	"scaler":      {"scaler", "api", "contract", "internal"},
	"local":       {"local", "controller", "eventbridge", "scaler", "api", "contract", "runtimes", "internal"},
	"cli":         {"cli", "local", "controller", "eventbridge", "scaler", "api", "contract", "runtimes", "internal"},
	"cmd":         {"cmd", "cli", "local", "controller", "eventbridge", "scaler", "api", "contract", "runtimes", "internal"},
}

// pkg is what `go list -json` tells of one package.
type pkg struct {
	ImportPath string
	Imports    []string
	Standard   bool
	Module     *struct{ Path string }
}

// TestLayers fails when a package of product code imports, outside its
// tests, a folder its layer may not: a component importing a sibling
// component (their shared wire contracts belong under contract/, their
// shared types under api/), anything importing
// upwards, or product code importing test infrastructure.
func TestLayers(t *testing.T) {
	var broken []string
	for _, p := range listDeps(t) {
		from := folder(p.ImportPath)
		allowed, ruled := mayImport[from]
		if !ruled {
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			to := folder(imp)
			if !contains(allowed, to) {
				broken = append(broken, strings.TrimPrefix(p.ImportPath, module)+" imports "+strings.TrimPrefix(imp, module))
			}
		}
	}
	sort.Strings(broken)
	require.Empty(t, broken, "imports across layers; move the shared contract under contract/ (wire) or api/ (types), or the assembly up to local/ or cmd/")
}

// TestContractsImportOnlyAPITypes fails when a package of contract/
// imports, outside its tests, anything but the standard library, other
// contract packages, the API's type packages (api/<group>/<version>) and
// apimachinery's types: a wire contract is data every side can read, with
// no client, no I/O library and no engine behind it.
func TestContractsImportOnlyAPITypes(t *testing.T) {
	var broken []string
	for _, p := range goList(t, "./contract/...") {
		for _, imp := range p.Imports {
			if !contractMayImport(imp) {
				broken = append(broken, strings.TrimPrefix(p.ImportPath, module)+" imports "+imp)
			}
		}
	}
	sort.Strings(broken)
	require.Empty(t, broken, "a contract imports only API type packages, apimachinery types and the standard library; move the I/O half to internal/")
}

// apiTypes matches the API's type packages: api/<group>/v<version>.
var apiTypes = regexp.MustCompile(`^` + regexp.QuoteMeta(module) + `api/[a-z]+/v[0-9]+((alpha|beta)[0-9]+)?$`)

// contractMayImport says whether a contract package may import imp.
func contractMayImport(imp string) bool {
	switch {
	case !strings.Contains(strings.SplitN(imp, "/", 2)[0], "."):
		return true // the standard library
	case strings.HasPrefix(imp, module+"contract/"), apiTypes.MatchString(imp):
		return true
	case imp == "k8s.io/apimachinery/pkg/types", strings.HasPrefix(imp, "k8s.io/apimachinery/pkg/apis/meta/"):
		return true
	}
	return false
}

// TestSiblingsShareNoCode checks the whole dependency closure, not only
// direct imports: controller, eventbridge and scaler reach none of each
// other's packages through any path.
func TestSiblingsShareNoCode(t *testing.T) {
	siblings := []string{"controller", "eventbridge", "scaler"}
	for _, s := range siblings {
		deps := goList(t, "-deps", "./"+s+"/...")
		for _, d := range deps {
			if to := folder(d.ImportPath); to != s && contains(siblings, to) {
				t.Errorf("%s depends on %s", s, strings.TrimPrefix(d.ImportPath, module))
			}
		}
	}
}

// listDeps lists every package of the module with its direct imports.
func listDeps(t *testing.T) []pkg {
	t.Helper()
	var out []pkg
	for _, p := range goList(t, "-deps", "./...") {
		if !p.Standard && p.Module != nil && p.Module.Path+"/" == module {
			out = append(out, p)
		}
	}
	require.NotEmpty(t, out)
	return out
}

func goList(t *testing.T, args ...string) []pkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json=ImportPath,Imports,Standard,Module"}, args...)...)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	data, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	var out []pkg
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
		out = append(out, p)
	}
	return out
}

// folder is the top-level folder of a package of this module.
func folder(importPath string) string {
	rest := strings.TrimPrefix(importPath, module)
	top, _, _ := strings.Cut(rest, "/")
	return top
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
