package kfndev_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/test/testenv"
)

// flaskPath returns a PATH whose python3 imports Flask, which python314's
// host needs: the machine's, or Debian's /usr/bin/python3 put first
// (make test installs python3-flask: hack/test-packages.sh).
func flaskPath(t *testing.T) string {
	t.Helper()
	if exec.Command("python3", "-c", "import flask").Run() == nil {
		return os.Getenv("PATH")
	}
	if out, err := exec.Command("/usr/bin/python3", "-c", "import flask").CombinedOutput(); err != nil {
		testenv.Missing(t, "Flask for python3 (Debian: python3-flask)", fmt.Errorf("%w: %s", err, out))
	}
	bin := t.TempDir()
	require.NoError(t, os.Symlink("/usr/bin/python3", filepath.Join(bin, "python3")))
	return bin + string(os.PathListSeparator) + os.Getenv("PATH")
}

// TestInitFoldersRunInKfnDev writes a function folder with kfn init for
// every runtime, runs them all in kfn dev, and calls each by HTTP and by
// an event of its Subscription: what the README promises a new user.
func TestInitFoldersRunInKfnDev(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: builds and runs kfn dev")
	}
	runtimes := []string{"nodejs22", "nodejs24", "nodejs26", "python312", "python314"}
	dir := t.TempDir()
	bin, err := kfnBinary()
	require.NoError(t, err)
	for _, rt := range runtimes {
		out, err := exec.Command(bin, "init", "--runtime", rt, filepath.Join(dir, "hello-"+rt)).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	dev := startDevEnv(t, dir, []string{"PATH=" + flaskPath(t)}, "--cooldown", "2s")
	for _, rt := range runtimes {
		name := "hello-" + rt
		t.Run(rt, func(t *testing.T) {
			var out string
			require.Eventually(t, func() bool {
				out, err = dev.kfn("invoke", name, "--data", `{"name":"Kyma"}`)
				return err == nil
			}, 60*time.Second, 100*time.Millisecond, "invoke %s: %s\n%s", name, out, dev.out)
			// The answer is the last line: kfn invoke may say first (on
			// stderr) that it waits for a function at zero.
			lines := strings.Split(strings.TrimSpace(out), "\n")
			assert.JSONEq(t, `{"message":"Hello Kyma"}`, lines[len(lines)-1])

			out, err = dev.kfn("publish", "--type", name+".requested.v1", "--source", "kfn", "--data", `{"name":"events"}`)
			require.NoError(t, err, out)
			want := name + " got type=" + name + ".requested.v1"
			require.Eventually(t, func() bool { return strings.Contains(dev.out.String(), want) }, 60*time.Second, 50*time.Millisecond,
				"the event reached %s:\n%s", name, dev.out)
		})
	}
}
