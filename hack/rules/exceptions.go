package main

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
)

// readExceptions reads the list of known violations: one key a line, as
// -list prints them; blank lines and # comments aside.
func readExceptions(name string) (map[string]bool, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	known := map[string]bool{}
	s := bufio.NewScanner(f)
	for n := 1; s.Scan(); n++ {
		line, _, _ := strings.Cut(s.Text(), "#")
		key := strings.Join(strings.Fields(line), " ")
		if key == "" {
			continue
		}
		if known[key] {
			return nil, fmt.Errorf("%s:%d: %q is listed twice", name, n, key)
		}
		known[key] = true
	}
	return known, s.Err()
}

// compare says each violation not in known, and each known one that no
// longer violates.
func compare(found violations, known map[string]bool) []string {
	var out []string
	for _, k := range sortedKeys(found) {
		if !known[k] {
			out = append(out, found[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(known)) {
		if _, ok := found[k]; !ok {
			out = append(out, fmt.Sprintf("hack/rules/exceptions.txt: %q no longer violates: remove it from the list", k))
		}
	}
	return out
}

func sortedKeys(v violations) []string { return slices.Sorted(maps.Keys(v)) }
