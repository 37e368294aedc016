package main

import (
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/tools/go/analysis/checker"
	"golang.org/x/tools/go/packages"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// notProduction are the top-level folders of tooling and tests.
var notProduction = []string{"bench", "test", "e2e", "hack"}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rules", flag.ContinueOnError)
	fs.SetOutput(stderr)
	list := fs.Bool("list", false, "print every violation in the exceptions list's form, exceptions ignored")
	exceptionsFile := fs.String("exceptions", "hack/rules/exceptions.txt", "the list of known violations")
	fs.IntVar(&duplThreshold, "dupl", duplThreshold, "dupl's threshold in syntax nodes (to calibrate it; make verify uses the default)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	patterns := fs.Args()
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	found, err := check(patterns)
	if err != nil {
		fmt.Fprintln(stderr, "rules:", err)
		return 2
	}
	if *list {
		for _, k := range sortedKeys(found) {
			fmt.Fprintln(stdout, k)
		}
		return 0
	}
	known, err := readExceptions(*exceptionsFile)
	if err != nil {
		fmt.Fprintln(stderr, "rules:", err)
		return 2
	}
	report := compare(found, known)
	for _, line := range report {
		fmt.Fprintln(stdout, line)
	}
	if len(report) > 0 {
		fmt.Fprintf(stdout, "rules: %d finding(s); the rules and why: hack/rules/doc.go\n", len(report))
		return 1
	}
	return 0
}

// A violation's key is its rule and place ("funlen cli/dev.go:newDevCommand");
// its message says where and why.
type violations map[string]string

// check loads the production packages matching patterns (from the current
// directory, the module's root) and runs every rule on them.
func check(patterns []string) (violations, error) {
	root, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	pkgs, err := load(root, patterns)
	if err != nil {
		return nil, err
	}
	found := violations{}
	graph, err := checker.Analyze(analyzers, pkgs, nil)
	if err != nil {
		return nil, err
	}
	files := map[string]*ast.File{}
	var fset *token.FileSet
	for _, p := range pkgs {
		fset = p.Fset
		for _, f := range p.Syntax {
			name := rel(root, p.Fset.File(f.Pos()).Name())
			if isProduction(name, f) {
				files[name] = f
			}
		}
	}
	for act := range graph.All() {
		if !act.IsRoot {
			continue
		}
		if act.Err != nil {
			return nil, fmt.Errorf("%s: %w", act, act.Err)
		}
		for _, d := range act.Diagnostics {
			pos := act.Package.Fset.Position(d.Pos)
			name := rel(root, pos.Filename)
			f, ok := files[name]
			if !ok {
				continue
			}
			where := name
			if act.Analyzer != fileLen {
				where = place(act.Package.Fset, f, name, d.Pos)
			}
			found[act.Analyzer.Name+" "+where] = fmt.Sprintf("%s:%d: %s: %s", name, pos.Line, act.Analyzer.Name, d.Message)
		}
	}
	if fset != nil {
		if err := duplicates(root, fset, files, found); err != nil {
			return nil, err
		}
	}
	return found, nil
}

// load lists the packages first (cheap) to leave tooling and tests out,
// then parses and type-checks the production ones, their dependencies
// read from export data.
func load(root string, patterns []string) ([]*packages.Package, error) {
	listed, err := packages.Load(&packages.Config{Mode: packages.NeedName | packages.NeedFiles, Dir: root}, patterns...)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, p := range listed {
		if len(p.GoFiles) > 0 && isProduction(rel(root, p.GoFiles[0]), nil) {
			ids = append(ids, p.PkgPath)
		}
	}
	if len(ids) == 0 {
		return nil, errors.New("no production package matches")
	}
	mode := packages.NeedName | packages.NeedFiles | packages.NeedCompiledGoFiles | packages.NeedImports |
		packages.NeedTypes | packages.NeedTypesSizes | packages.NeedSyntax | packages.NeedTypesInfo | packages.NeedModule
	pkgs, err := packages.Load(&packages.Config{Mode: mode, Dir: root}, ids...)
	if err != nil {
		return nil, err
	}
	if n := packages.PrintErrors(pkgs); n > 0 {
		return nil, fmt.Errorf("%d package(s) do not load", n)
	}
	return pkgs, nil
}

// isProduction is a file of production Go: not a test, not under a
// tooling or test folder, not generated (f, when parsed, says so).
func isProduction(name string, f *ast.File) bool {
	top, _, _ := strings.Cut(name, "/")
	switch {
	case slices.Contains(notProduction, top), strings.HasSuffix(name, "_test.go"),
		strings.HasPrefix(filepath.Base(name), "zz_generated"), f != nil && ast.IsGenerated(f):
		return false
	}
	return !strings.HasPrefix(name, "../")
}

func rel(root, name string) string {
	if r, err := filepath.Rel(root, name); err == nil {
		return filepath.ToSlash(r)
	}
	return name
}

// place is file:Decl for the top-level declaration holding pos (a func as
// Name or Recv.Name, a type as its name), or the file alone.
func place(fset *token.FileSet, f *ast.File, name string, pos token.Pos) string {
	for _, d := range f.Decls {
		if pos < d.Pos() || pos >= d.End() {
			continue
		}
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv != nil && len(d.Recv.List) == 1 {
				return name + ":" + recvName(d.Recv.List[0].Type) + "." + d.Name.Name
			}
			return name + ":" + d.Name.Name
		case *ast.GenDecl:
			for _, s := range d.Specs {
				if ts, ok := s.(*ast.TypeSpec); ok && pos >= s.Pos() && pos < s.End() {
					return name + ":" + ts.Name.Name
				}
			}
		}
	}
	return name
}

func recvName(t ast.Expr) string {
	for {
		switch e := t.(type) {
		case *ast.StarExpr:
			t = e.X
		case *ast.IndexExpr:
			t = e.X
		case *ast.IndexListExpr:
			t = e.X
		case *ast.Ident:
			return e.Name
		default:
			return "?"
		}
	}
}
