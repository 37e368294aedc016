package cluster

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/local/dev"
)

// TestCLIOnTheCluster uses the kfn command as a user with a kubeconfig
// does: a folder written by kfn init is applied, an event published and a
// request sent through port-forwards to kfn's event bridge, and get and
// logs show what happened.
func TestCLIOnTheCluster(t *testing.T) {
	t.Parallel() // beside the other scenarios that leave the install as it is (doc.go)
	ns := namespace(t, "cli")
	dir := filepath.Join(t.TempDir(), "greeter")
	init := exec.CommandContext(t.Context(), filepath.Join(platform.root, "bin", "kfn"), "init", "--runtime", "nodejs22", dir)
	written, err := init.CombinedOutput()
	require.NoError(t, err, "%s", written)

	out, err := kfn(t, "apply", "-n", ns, dir)
	require.NoError(t, err)
	assert.Contains(t, out, "Function "+ns+"/greeter applied")
	waitSubscriptionReady(t, ns, "greeter")

	t.Run("publish reaches the function at zero", func(t *testing.T) {
		out, err := kfn(t, "publish", "--type", "greeter.requested.v1", "--source", "kfn", "--id", ns+"-1", "--data", `{"name": "cli"}`)
		require.NoError(t, err)
		assert.Contains(t, out, "published "+ns+"-1")
	})
	t.Run("get shows the delivery and the replica", func(t *testing.T) {
		eventually(t, 3*time.Minute, "the event delivered, counted by get", func() error {
			out, err := kfn(t, "get", "-n", ns, "-o", "json")
			if err != nil {
				return err
			}
			var st dev.Status
			if err := json.Unmarshal([]byte(out), &st); err != nil {
				return err
			}
			if len(st.Errors) > 0 {
				return fmt.Errorf("get: %v", st.Errors)
			}
			if len(st.Subscriptions) != 1 || st.Subscriptions[0].Delivered < 1 {
				return fmt.Errorf("subscriptions %+v", st.Subscriptions)
			}
			if len(st.Functions) != 1 || !st.Functions[0].Autoscaled {
				return fmt.Errorf("functions %+v", st.Functions)
			}
			return nil
		})
		out, err := kfn(t, "get", "-n", ns)
		require.NoError(t, err)
		assert.Contains(t, out, ns+"/greeter")
		assert.Contains(t, out, "0..3", "its scaling range")
	})
	t.Run("logs show the handler's output", func(t *testing.T) {
		eventually(t, time.Minute, "the handler's line", func() error {
			out, err := kfn(t, "logs", "-n", ns, "greeter")
			if err == nil && !strings.Contains(out, `greeter got type=greeter.requested.v1 data={"name":"cli"}`) {
				err = fmt.Errorf("logs:\n%s", out)
			}
			return err
		})
	})
	t.Run("invoke answers through the gateway", func(t *testing.T) {
		out, err := kfn(t, "invoke", "-n", ns, "greeter", "--data", `{"name": "gateway"}`)
		require.NoError(t, err)
		assert.Contains(t, out, `"message":"Hello gateway"`)
	})
}
