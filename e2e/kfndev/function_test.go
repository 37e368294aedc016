package kfndev_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKymaFunctionCommandsInKfnDev runs the Kyma CLI's function commands
// as Kyma's CLI suggests them (init, then create nodejs with --source and
// --dependencies, get, delete) against kfn dev: create writes the
// Function's manifest into the project kfn dev runs, which starts it,
// and delete removes it.
func TestKymaFunctionCommandsInKfnDev(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: builds and runs kfn dev")
	}
	project := t.TempDir()
	dev := startDev(t, project)
	src := filepath.Join(t.TempDir(), "src")

	out, err := dev.kfn("function", "init", "nodejs", "--dir", src)
	require.NoError(t, err, out)
	out, err = dev.kfn("function", "create", "nodejs", "my-function", "--source", filepath.Join(src, "handler.js"),
		"--dependencies", filepath.Join(src, "package.json"), "--project", project)
	require.NoError(t, err, out)
	assert.Contains(t, out, "resource my-function applied")
	require.FileExists(t, filepath.Join(project, "my-function.yaml"))

	require.Eventually(t, func() bool {
		out, err = dev.kfn("invoke", "my-function")
		return err == nil && strings.Contains(out, "Hello World from my-function on nodejs24!")
	}, 60*time.Second, 100*time.Millisecond, "invoke: %s\n%s", out, dev.out)
	require.Eventually(t, func() bool {
		out, err = dev.kfn("function", "get")
		return err == nil && squeezed(out, "my-function True True nodejs24")
	}, 30*time.Second, 100*time.Millisecond, "get: %s", out)

	out, err = dev.kfn("function", "create", "nodejs", "elsewhere", "--project", t.TempDir(), "--wait", "2s")
	require.NoError(t, err, out)
	assert.Contains(t, out, "has not shown the change in 2s: is it running the project", "kfn dev runs another project")

	out, err = dev.kfn("function", "delete", "my-function", "--project", project)
	require.NoError(t, err, out)
	assert.Contains(t, out, "resource my-function deleted")
	_, statErr := os.Stat(filepath.Join(project, "my-function.yaml"))
	assert.True(t, os.IsNotExist(statErr))
	out, err = dev.kfn("function", "get")
	require.NoError(t, err, out)
	assert.NotContains(t, out, "my-function", "gone once delete returns")
}

// squeezed reports whether a line of out, its runs of spaces made one,
// starts with want.
func squeezed(out, want string) bool {
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.Join(strings.Fields(line), " "), want) {
			return true
		}
	}
	return false
}
