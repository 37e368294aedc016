package chart_test

import (
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// TestREADMEDocumentsEveryValue keeps the README's table of values complete:
// every value of values.yaml has a row, and every row is a value.
func TestREADMEDocumentsEveryValue(t *testing.T) {
	data, err := os.ReadFile("values.yaml")
	require.NoError(t, err)
	var values map[string]any
	require.NoError(t, yaml.Unmarshal(data, &values))
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)

	_, table, ok := strings.Cut(string(readme), "\n## Values\n")
	require.True(t, ok, "README.md has a section Values")
	table, _, _ = strings.Cut(table, "\n## ")
	documented := map[string]bool{}
	for _, line := range strings.Split(table, "\n") {
		if strings.HasPrefix(line, "| `") {
			key := strings.TrimPrefix(line, "| `")
			if i := strings.Index(key, "`"); i > 0 {
				documented[key[:i]] = true
			}
		}
	}
	leaves := valuePaths("", values)
	sort.Strings(leaves)
	for _, p := range leaves {
		assert.True(t, documented[p], "README.md has no row for %s", p)
		delete(documented, p)
	}
	for p := range documented {
		assert.Fail(t, "README.md documents a value that does not exist", p)
	}
}

// valuePaths lists the documented paths: leaves, empty maps, and whole
// resources blocks.
func valuePaths(prefix string, m map[string]any) []string {
	var out []string
	for k, v := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		sub, ok := v.(map[string]any)
		if !ok || len(sub) == 0 || k == "resources" {
			out = append(out, p)
			continue
		}
		out = append(out, valuePaths(p, sub)...)
	}
	return out
}
