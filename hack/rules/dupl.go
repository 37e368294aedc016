package main

import (
	"fmt"
	"go/ast"
	"go/token"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mibk/dupl/job"
	"github.com/mibk/dupl/syntax"
)

// duplThreshold is the size, in syntax nodes, from which two sequences of
// the same shape are one piece of logic written twice (doc.go).
var duplThreshold = 35

// duplicates runs dupl over the files (relative to root) at once, repeats
// across packages included, and adds a violation per group of places.
func duplicates(root string, fset *token.FileSet, files map[string]*ast.File, found violations) error {
	for _, group := range findClones(root, slices.Sorted(maps.Keys(files)), duplThreshold) {
		var places, where []string
		for _, frag := range group {
			name := rel(root, frag[0].Filename)
			f := files[name]
			tf := fset.File(f.Pos())
			start, end := tf.Pos(frag[0].Pos), tf.Pos(frag[len(frag)-1].End-1)
			places = append(places, place(fset, f, name, start))
			where = append(where, fmt.Sprintf("%s:%d-%d", name, tf.Line(start), tf.Line(end)))
		}
		slices.Sort(places)
		places = slices.Compact(places)
		if allOptions(places) {
			continue
		}
		found["dupl "+strings.Join(places, " ")] = fmt.Sprintf("%s: dupl: the same logic %d times: make it one", strings.Join(where, " ~ "), len(group))
	}
	return nil
}

// findClones is dupl's own search (its main, without the printing): the
// groups of at least two fragments of threshold nodes or more, each
// fragment a sequence of whole syntax units.
func findClones(root string, names []string, threshold int) [][][]*syntax.Node {
	feed := make(chan string)
	go func() {
		for _, n := range names {
			feed <- filepath.Join(root, n)
		}
		close(feed)
	}()
	t, data, done := job.BuildTree(job.Parse(feed))
	<-done
	t.Update(&syntax.Node{Type: -1}) // the end of the stream
	groups := map[string][][]*syntax.Node{}
	for m := range t.FindDuplOver(threshold) {
		if match := syntax.FindSyntaxUnits(*data, m, threshold); len(match.Frags) > 0 {
			groups[match.Hash] = append(groups[match.Hash], match.Frags...)
		}
	}
	var out [][][]*syntax.Node
	for _, h := range slices.Sorted(maps.Keys(groups)) {
		if g := unique(groups[h]); len(g) > 1 {
			out = append(out, g)
		}
	}
	return out
}

// unique drops the fragments found twice (same file, same start).
func unique(group [][]*syntax.Node) [][]*syntax.Node {
	type at struct {
		file string
		pos  int
	}
	seen := map[at]bool{}
	var out [][]*syntax.Node
	for _, frag := range group {
		k := at{frag[0].Filename, frag[0].Pos}
		if !seen[k] {
			seen[k] = true
			out = append(out, frag)
		}
	}
	return out
}

// allOptions is every place a functional option (a func WithX): the API
// shape STYLE.md asks for, alike by design.
func allOptions(places []string) bool {
	for _, p := range places {
		_, decl, _ := strings.Cut(p, ":")
		if !hasWordPrefix(decl, "With", false) {
			return false
		}
	}
	return true
}
