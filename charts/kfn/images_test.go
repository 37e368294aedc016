package chart_test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/controller/function"
)

// TestEveryRuntimeImageIsBuilt holds the runtime images the controller
// runs (runtime-<name>, by default and through the chart's
// runtimes.images) to those runtimes/images.txt builds, for make images
// and the real node alike: each one built, nothing built that no runtime
// runs, from a Dockerfile that declares every build argument given.
func TestEveryRuntimeImageIsBuilt(t *testing.T) {
	root := filepath.Join("..", "..", "runtimes")
	f, err := os.Open(filepath.Join(root, "images.txt"))
	require.NoError(t, err)
	defer f.Close()
	built := map[string]bool{}
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		require.GreaterOrEqual(t, len(fields), 2, "runtime, Dockerfile, arguments: %q", lines.Text())
		built[fields[0]] = true
		dockerfile, err := os.ReadFile(filepath.Join(root, fields[1]))
		require.NoError(t, err, "the Dockerfile of %s", fields[0])
		for _, arg := range fields[2:] {
			name, _, ok := strings.Cut(arg, "=")
			require.True(t, ok, "%s: NAME=value, not %q", fields[0], arg)
			assert.Regexp(t, regexp.MustCompile(`(?m)^ARG `+regexp.QuoteMeta(name)+`\b`), string(dockerfile), "%s declares %s", fields[1], name)
		}
	}
	require.NoError(t, lines.Err())

	var run []string
	for _, image := range function.DefaultConfig().Plan.Images {
		name, _, _ := strings.Cut(filepath.Base(image), ":")
		run = append(run, strings.TrimPrefix(name, "runtime-"))
	}
	for _, rt := range run {
		assert.True(t, built[rt], "runtime-%s runs but runtimes/images.txt builds no such image", rt)
	}
	for rt := range built {
		assert.True(t, slices.Contains(run, rt), "runtimes/images.txt builds runtime-%s, which no runtime runs", rt)
	}
}
