package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sivchari/containedctx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/tools/go/analysis/analysistest"
)

// writePackage writes src/<pkg>/<pkg>.go under a new GOPATH-like folder
// for analysistest, and returns the folder.
func writePackage(t *testing.T, pkg, src string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "src", pkg), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "src", pkg, pkg+".go"), []byte(src), 0o644))
	return dir
}

// lines is n lines of text, each a comment.
func lines(n int) string { return strings.Repeat("// a line\n", n) }

func TestFileLenFiresPastFiveHundredLines(t *testing.T) {
	long := "package long // want `file is 501 lines long, more than 500`\n" + lines(500)
	analysistest.Run(t, writePackage(t, "long", long), fileLen, "long")
	atLimit := "package limit\n" + lines(499)
	analysistest.Run(t, writePackage(t, "limit", atLimit), fileLen, "limit")
}

// function is a func of n lines, from func to its closing brace.
func function(name string, n int, want string) string {
	return fmt.Sprintf("func %s() { %s\n%s}\n", name, want, strings.Repeat("\t_ = 0\n", n-2))
}

func TestFuncLenFiresPastEightyLinesFromFuncToBrace(t *testing.T) {
	src := "package fn\n\n" +
		function("long", 81, "// want `func long is 81 lines long, more than 80`") +
		function("limit", 80, "") +
		"type T struct{}\n\n" +
		strings.Replace(function("method", 81, "// want `func method is 81 lines long`"), "func method", "func (T) method", 1)
	analysistest.Run(t, writePackage(t, "fn", src), funcLen, "fn")
}

func TestContainedCtxFiresOnAStoredContext(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), containedctx.Analyzer, "ctx")
}

func TestShapeFiresOnAnotherConstructorOrLifecycle(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), shape, "shape")
}

// twice is a function body of some weight, for dupl.
const twice = `
	total := 0
	for i, v := range values {
		if v > limit {
			total += v * i
			continue
		}
		switch {
		case v < 0:
			total -= v
		default:
			total += v / 2
		}
	}
	return total
}
`

func TestDuplFindsLogicWrittenTwiceButNotOptions(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644))
	}
	write("a.go", "package p\n\nfunc sum(values []int, limit int) int {"+twice+
		"\ntype Option func(*int)\n\nfunc WithLimit(n int) Option {\n\treturn func(o *int) {\n\t\tif n > 0 && n < 100 {\n\t\t\t*o = n * 2\n\t\t}\n\t}\n}\n")
	write("b.go", "package p\n\nfunc total(values []int, limit int) int {"+twice+
		"\nfunc WithCap(n int) Option {\n\treturn func(o *int) {\n\t\tif n > 0 && n < 100 {\n\t\t\t*o = n * 2\n\t\t}\n\t}\n}\n")
	write("c.go", "package p\n\nfunc other(n int) int { return n }\n")
	files, fset := parseFiles(t, dir, "a.go", "b.go", "c.go")
	found := violations{}
	require.NoError(t, duplicates(dir, fset, files, found))
	assert.Equal(t, []string{"dupl a.go:sum b.go:total"}, sortedKeys(found))
	assert.Contains(t, found["dupl a.go:sum b.go:total"], "a.go:3-18 ~ b.go:3-18")
}

func TestTheListMustOnlyShrink(t *testing.T) {
	list := filepath.Join(t.TempDir(), "exceptions.txt")
	require.NoError(t, os.WriteFile(list, []byte("# known\nfilelen a.go\nfunlen  b.go:F # paid soon\n\ndupl c.go:G d.go:H\n"), 0o644))
	known, err := readExceptions(list)
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{"filelen a.go": true, "funlen b.go:F": true, "dupl c.go:G d.go:H": true}, known)

	found := violations{
		"filelen a.go":       "a.go:1: filelen: long",
		"dupl c.go:G d.go:H": "c.go:1-9 ~ d.go:1-9: dupl",
		"shape e.go:NewX":    "e.go:3: shape: NewX must return *X",
	}
	assert.Equal(t, []string{
		"e.go:3: shape: NewX must return *X",
		`hack/rules/exceptions.txt: "funlen b.go:F" no longer violates: remove it from the list`,
	}, compare(found, known))
	delete(found, "shape e.go:NewX")
	found["funlen b.go:F"] = "b.go:2: funlen: long"
	assert.Empty(t, compare(found, known))

	require.NoError(t, os.WriteFile(list, []byte("filelen a.go\nfilelen  a.go\n"), 0o644))
	_, err = readExceptions(list)
	assert.ErrorContains(t, err, "listed twice")
}

func TestProductionLeavesToolingTestsAndGeneratedOut(t *testing.T) {
	for name, want := range map[string]bool{
		"cli/function.go":                                true,
		"cli/function_test.go":                           false,
		"bench/report/main.go":                           false,
		"test/layers/layers.go":                          false,
		"e2e/kfndev/dev.go":                              false,
		"hack/rules/main.go":                             false,
		"api/eventing/v1alpha2/zz_generated.deepcopy.go": false,
		"testing/x.go":                                   true,
	} {
		assert.Equal(t, want, isProduction(name, nil), name)
	}
}

func parseFiles(t *testing.T, dir string, names ...string) (map[string]*ast.File, *token.FileSet) {
	t.Helper()
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	for _, n := range names {
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		require.NoError(t, err)
		files[n] = f
	}
	return files, fset
}
