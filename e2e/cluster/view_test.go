package cluster

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/local/webview"
	"github.com/kfn-dev/kfn/test/browsertest"
)

// ViewScreenshotEnv names a file the cluster view's browser test writes its
// screenshot to: KFN_CLUSTER_VIEW_SCREENSHOT=docs/cluster-view.png
// refreshes the README's picture.
const ViewScreenshotEnv = "KFN_CLUSTER_VIEW_SCREENSHOT"

var viewLine = regexp.MustCompile(`: (http://127\.0\.0\.1:\d+/\S+/ui/) `)

// startView runs `kfn view -n ns` as the user of kubeconfig until the test
// ends, and returns its page's address.
func startView(t *testing.T, kubeconfig, ns string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), filepath.Join(platform.root, "bin", "kfn"), "view", "-n", ns, "--kubeconfig", kubeconfig)
	cmd.Env = append(os.Environ(), "KFN_ADDR=", "NO_COLOR=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	found := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			if m := viewLine.FindStringSubmatch(lines.Text()); m != nil {
				found <- m[1]
			}
		}
		close(found)
	}()
	select {
	case url, ok := <-found:
		require.True(t, ok, "kfn view ended without printing its page's address")
		return url
	case <-time.After(time.Minute):
		t.Fatal("kfn view printed no page address within a minute")
		return ""
	}
}

// viewState reads the view's state as the page gets it.
func viewState(t *testing.T, page string) webview.State {
	t.Helper()
	code, body, err := get(page + "state")
	require.NoError(t, err)
	require.Equal(t, 200, code, body)
	var st webview.State
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	return st
}

// checkClusterView opens kfn view of ns in a real Chromium, as the
// cluster's administrator: the chain of event id (delivered to first, the
// event it emitted delivered to second) appears with each hop, the
// Subscriptions' counts from the event bridges' metrics, the dead letter
// of deadID with its Replay button, whose click delivers it to the fixed
// function; a screenshot shows it.
func checkClusterView(t *testing.T, ns, id, deadID string) {
	chromium, err := exec.LookPath("chromium")
	require.NoError(t, err, "chromium (make test installs it: hack/test-packages.sh)")
	page := startView(t, platform.cluster.Config.KubeconfigPath(), ns)
	ctx := browsertest.Start(t, chromium)
	browsertest.Do(t, ctx, "open the view", chromedp.Navigate(page))
	browsertest.Until(t, ctx, "the first state", `document.body.dataset.updates >= 1 && document.getElementById('live').dataset.state === 'live'`)
	browsertest.Until(t, ctx, "the functions", `['first', 'second', 'broken'].every((n) => !!document.querySelector('#functions tr[data-key="`+ns+`/' + n + '"]'))`)
	browsertest.Until(t, ctx, "the chain with each hop", `[...document.querySelectorAll('.chain')].some((c) =>
		!!c.querySelector('.event[data-id="`+id+`"] .delivery[data-subscription="`+ns+`/first"][data-outcome="delivered"]')
		&& !!c.querySelector('.event[data-id="`+id+`-next"] .delivery[data-subscription="`+ns+`/second"][data-outcome="delivered"]'))`)
	browsertest.Until(t, ctx, "the counts", `parseInt(document.querySelector('#subscriptions tr[data-key="`+ns+`/first"] [data-field="delivered"]').textContent, 10) >= 20`)
	browsertest.Until(t, ctx, "the dead letter", `[...document.querySelectorAll('#deadletters tr[data-seq]')].some((tr) => tr.textContent.includes('`+deadID+`') && !!tr.querySelector('button.replay'))`)
	assert.Equal(t, "kfn view", browsertest.Do(t, ctx, "the title", chromedp.Evaluate[string](`document.title`)))

	shot := browsertest.Do(t, ctx, "screenshot", chromedp.CaptureScreenshot()) // the window: the tables and the newest chains
	require.NoError(t, os.WriteFile(filepath.Join(t.TempDir(), "cluster-view.png"), shot, 0o644))
	if out := os.Getenv(ViewScreenshotEnv); out != "" {
		require.NoError(t, os.WriteFile(out, shot, 0o644))
	}

	// Found and clicked in one step: the table is drawn anew on each update.
	clicked := browsertest.Do(t, ctx, "click Replay", chromedp.Evaluate[bool](`(() => {
		const tr = [...document.querySelectorAll('#deadletters tr[data-seq]')].find((tr) => tr.textContent.includes('`+deadID+`'));
		if (!tr) return false;
		tr.querySelector('button.replay').click();
		return true;
	})()`))
	require.True(t, clicked, "the Replay button of %s is there", deadID)
	browsertest.Until(t, ctx, "the dead letter replayed, gone", `![...document.querySelectorAll('#deadletters tr[data-seq]')].some((tr) => tr.textContent.includes('`+deadID+`'))`)
	require.NoError(t, platform.recorder.waitAll(t.Context(), "fixed", []string{deadID}, 2*time.Minute), "the replay reached the fixed function")
	assert.Empty(t, browsertest.Do(t, ctx, "replay errors", chromedp.Evaluate[string](
		`[...document.querySelectorAll('.replay-error')].map((e) => e.textContent).join('; ')`)))
}
