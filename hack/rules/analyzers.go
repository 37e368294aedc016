package main

import (
	"fmt"
	"go/ast"
	"go/types"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/sivchari/containedctx"
	"github.com/ultraware/funlen"
	"golang.org/x/tools/go/analysis"
)

const (
	maxFileLines = 500
	maxFuncLines = 80
)

// analyzers are the per-package rules; dupl, across packages, is apart.
var analyzers = []*analysis.Analyzer{fileLen, funcLen, containedctx.Analyzer, shape}

var fileLen = &analysis.Analyzer{
	Name: "filelen",
	Doc:  fmt.Sprintf("a file has at most %d lines", maxFileLines),
	Run: func(pass *analysis.Pass) (any, error) {
		for _, f := range pass.Files {
			if n := pass.Fset.File(f.Pos()).LineCount(); n > maxFileLines {
				pass.Reportf(f.Package, "file is %d lines long, more than %d: split it along what it does", n, maxFileLines)
			}
		}
		return nil, nil
	},
}

// funlenLib counts the lines between a func's first and last line: 78 of
// them is 80 from func to its closing brace. Statements are not counted (-1).
var funlenLib = funlen.NewAnalyzer(maxFuncLines-2, -1, false)

var funlenMessage = regexp.MustCompile(`^Function '(\w+)' is too long \((\d+) > \d+\)$`)

// funcLen is funlen with its message said in the rule's own terms.
var funcLen = &analysis.Analyzer{
	Name: "funlen",
	Doc:  fmt.Sprintf("a function has at most %d lines, from func to its closing brace", maxFuncLines),
	Run: func(pass *analysis.Pass) (any, error) {
		p := *pass
		p.Report = func(d analysis.Diagnostic) {
			if m := funlenMessage.FindStringSubmatch(d.Message); m != nil {
				n, _ := strconv.Atoi(m[2])
				d.Message = fmt.Sprintf("func %s is %d lines long, more than %d: split it into named steps", m[1], n+2, maxFuncLines)
			}
			pass.Report(d)
		}
		return funlenLib.Run(&p)
	},
}

var shape = &analysis.Analyzer{
	Name: "shape",
	Doc:  "New/NewX returns *X or (*X, error) and starts no goroutine; Run(ctx context.Context, ...) error",
	Run:  runShape,
}

func runShape(pass *analysis.Pass) (any, error) {
	for _, f := range pass.Files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !fn.Name.IsExported() {
				continue
			}
			obj, ok := pass.TypesInfo.Defs[fn.Name].(*types.Func)
			if !ok {
				continue
			}
			sig := obj.Type().(*types.Signature)
			switch name := fn.Name.Name; {
			case name == "Run":
				checkRun(pass, fn, sig)
			case fn.Recv == nil && isConstructorName(name):
				checkConstructor(pass, fn, sig)
			}
		}
	}
	return nil, nil
}

// isConstructorName is New, or New followed by an upper-case letter.
func isConstructorName(name string) bool { return hasWordPrefix(name, "New", true) }

// hasWordPrefix is name the prefix, alone when alone is true, or followed
// by an upper-case letter (NewX, WithX; not Newline, Without).
func hasWordPrefix(name, prefix string, alone bool) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	if rest == "" {
		return ok && alone
	}
	return ok && unicode.IsUpper([]rune(rest)[0])
}

func checkRun(pass *analysis.Pass, fn *ast.FuncDecl, sig *types.Signature) {
	params, results := sig.Params(), sig.Results()
	if params.Len() == 0 || !isNamed(params.At(0).Type(), "context", "Context") ||
		results.Len() != 1 || !isError(results.At(0).Type()) {
		pass.Reportf(fn.Name.Pos(), "Run must take a context.Context first and return an error (it runs until the context ends); a task run once is another name")
	}
}

func checkConstructor(pass *analysis.Pass, fn *ast.FuncDecl, sig *types.Signature) {
	want := strings.TrimPrefix(fn.Name.Name, "New")
	results := sig.Results()
	ok := results.Len() == 1 || results.Len() == 2 && isError(results.At(1).Type())
	if ok {
		ok = returnsPointerTo(pass.Pkg, results.At(0).Type(), want)
	}
	if !ok {
		if want == "" {
			want = "T"
		}
		pass.Reportf(fn.Name.Pos(), "%s must return *%s or (*%s, error), %s a type of this package", fn.Name.Name, want, want, want)
	}
	if fn.Body == nil {
		return
	}
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if g, isGo := n.(*ast.GoStmt); isGo {
			pass.Reportf(g.Pos(), "%s starts a goroutine: a constructor only builds, Run(ctx) runs", fn.Name.Name)
		}
		return true
	})
}

// returnsPointerTo is t a pointer to a named type of pkg, called name
// unless name is empty.
func returnsPointerTo(pkg *types.Package, t types.Type, name string) bool {
	ptr, ok := t.(*types.Pointer)
	if !ok {
		return false
	}
	named, ok := types.Unalias(ptr.Elem()).(*types.Named)
	if !ok || named.Obj().Pkg() != pkg {
		return false
	}
	return name == "" || named.Obj().Name() == name
}

func isNamed(t types.Type, pkg, name string) bool {
	named, ok := types.Unalias(t).(*types.Named)
	return ok && named.Obj().Pkg() != nil && named.Obj().Pkg().Path() == pkg && named.Obj().Name() == name
}

func isError(t types.Type) bool {
	return types.Identical(t, types.Universe.Lookup("error").Type())
}
