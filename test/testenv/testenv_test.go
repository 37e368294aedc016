package testenv_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/test/testenv"
)

// child is the name of the test that the tests below run in a child
// process: Missing skips or fails the test that calls it, which can only
// be observed from outside.
const child = "TestMissingInAChild"

// TestMissingInAChild calls Missing when run as the child of the tests
// below; on its own it does nothing.
func TestMissingInAChild(t *testing.T) {
	if os.Getenv("KFN_TESTENV_CHILD") == "" {
		return
	}
	testenv.LookPath(t, "kfn-no-such-tool")
	t.Log("not reached")
}

// runChild runs TestMissingInAChild with CI set to ci and returns its
// verbose output and whether it passed.
func runChild(t *testing.T, ci string) (string, bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+child+"$", "-test.v")
	cmd.Env = append(os.Environ(), "KFN_TESTENV_CHILD=1", testenv.CIEnv+"="+ci)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		require.NoError(t, err)
	}
	return string(out), err == nil
}

func TestMissingToolSkipsOutsideCI(t *testing.T) {
	for _, ci := range []string{"", "false", "0"} {
		out, ok := runChild(t, ci)
		assert.True(t, ok, "CI=%q: %s", ci, out)
		assert.Contains(t, out, "--- SKIP: "+child, "CI=%q", ci)
		assert.Contains(t, out, "kfn-no-such-tool is missing", "the skip names the tool")
		assert.NotContains(t, out, "not reached")
	}
}

func TestMissingToolFailsUnderCI(t *testing.T) {
	for _, ci := range []string{"true", "1"} {
		out, ok := runChild(t, ci)
		assert.False(t, ok, "CI=%q: %s", ci, out)
		assert.Contains(t, out, "--- FAIL: "+child, "CI=%q", ci)
		assert.Contains(t, out, "kfn-no-such-tool is missing", "the failure names the tool")
		assert.NotContains(t, out, "not reached")
	}
}

func TestLookPathFindsATool(t *testing.T) {
	p := testenv.LookPath(t, "sh") // POSIX: every machine these tests run on has one
	assert.True(t, strings.HasSuffix(p, "/sh"), p)
}
