// Command rules fails `make verify` when kfn's production Go breaks one of
// the rules the code is written to (STYLE.md, issue 47): rules that review
// alone did not hold (files over 500 lines went from 1 to 10 in one round).
//
// Production Go is every package of the main module but those under bench/,
// test/, e2e/ and hack/, without its _test.go files and without generated
// files (a "Code generated ... DO NOT EDIT." header, zz_generated*). The
// rules, each by the name it is reported and listed under:
//
//	filelen       a file has at most 500 lines. A file is read whole; past
//	              500 lines it holds more than one concern: split it along
//	              what it does (one file per concern), not by line count.
//	funlen        a function has at most 80 lines, from `func` to its closing
//	              brace (github.com/ultraware/funlen, which counts the lines
//	              between the two, at 78, statements not counted). A longer
//	              one reads better as named steps.
//	containedctx  no context.Context in a struct field
//	              (github.com/sivchari/containedctx): a stored context
//	              outlives its request, races with concurrent calls and hides
//	              cancellation; pass it to the methods that need it.
//	shape         one constructor and lifecycle shape:
//	              - an exported package-level func named New returns *T or
//	                (*T, error), T a type of its own package; one named NewX
//	                (X starting upper-case) returns *X or (*X, error);
//	              - such a constructor starts no goroutine (no go statement
//	                in its body): running is the job of Run;
//	              - an exported func or method named Run takes a
//	                context.Context first and returns exactly one error: it
//	                runs until its context ends (or it fails) and says why
//	                it stopped. A task run once is another idea: name it
//	                otherwise (Do, Execute).
//	              One shape lets a reader wire any part without reading it,
//	              and lets errgroup run them all.
//	dupl          no duplicated logic (github.com/mibk/dupl over all the
//	              production files at once): a sequence of whole syntax
//	              units (statements, declarations) of at least 35 nodes each
//	              that stands again elsewhere with the same shape (names and
//	              values aside) is one piece of logic written twice; make it
//	              one. 35 is where this tree's real repeats start (a
//	              scaffolding path written twice, a writer, a handler, a
//	              pair of twin functions) and its thin boilerplate stops; a
//	              group of functional options alone (funcs WithX, the API
//	              shape STYLE.md asks for) is alike by design and not
//	              reported.
//
// A violation is keyed by its rule and its place, a file or a file and a
// declaration (a func as Name or Recv.Name, a type as Name):
//
//	filelen cli/function.go
//	funlen cli/dev.go:newDevCommand
//	dupl a/x.go:F b/y.go:G        (each place of a group of repeats)
//
// exceptions.txt beside this file lists the violations the tree had when the
// rules began (one a line, # comments) and must only shrink: a violation not
// in it fails, and so does a line that no longer violates ("remove it from
// the list"), so that the list can't rot. Pay a line's debt, delete the line.
// Never add one to land a change: split the file or the function instead.
//
// Usage, from the module's root (make verify):
//
//	go run ./hack/rules                 check ./..., exit 1 on a finding
//	go run ./hack/rules -list           print every violation in the list's
//	                                    form, exceptions ignored, exit 0
//	go run ./hack/rules -exceptions F   read the list from F
//
// Types come from the compiler's export data, which `go vet ./...` (just
// before it in make verify) has already built: after vet, the check costs a
// parse and type-check of the module's own packages.
package main
