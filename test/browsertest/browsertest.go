package browsertest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// Start starts chromium (its path), headless, with a new empty profile,
// and returns a chromedp context of one tab; the browser stops when the
// test ends. The flags keep it from any network but the page's:
// background networking, component updates and sync would be refused on
// this closed network anyway.
func Start(t *testing.T, chromium string) context.Context {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox, // root, in a container
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first action starts the browser, which lives as long as the
	// context of that action: ctx, not one with a timeout.
	_, err := chromedp.Run(ctx, chromedp.Navigate("about:blank"))
	require.NoError(t, err, "start %s", chromium)
	return ctx
}

// Do runs an action on the page, bounded by a minute, and fails the test
// (what says what it did) if it fails.
func Do[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	actx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(actx, a)
	require.NoError(t, err, what)
	return v
}

// Until waits, at most 50s, for a JavaScript condition on the page,
// checked again on every change of the page (no reload: the page changes
// only through its event stream). A poll whose JavaScript context went
// away under it (Chromium replaces a page's context as it finishes
// loading; on a loaded machine a poll begun at once can name the old one)
// is begun again in the new one.
func Until(t *testing.T, ctx context.Context, what, js string) {
	t.Helper()
	deadline := time.Now().Add(50 * time.Second)
	for {
		actx, cancel := context.WithTimeout(ctx, time.Minute)
		_, err := chromedp.Run(actx, chromedp.Poll[bool](js, chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(time.Until(deadline))))
		cancel()
		if err != nil && contextGone(err) && time.Now().Before(deadline) {
			continue
		}
		require.NoError(t, err, what)
		return
	}
}

// contextGone reports whether err is Chromium's answer about a JavaScript
// context that no longer exists.
func contextGone(err error) bool {
	var cdp *cdproto.Error
	return errors.As(err, &cdp) && cdp.Code == -32000 &&
		(strings.Contains(cdp.Message, "Cannot find context with specified id") || strings.Contains(cdp.Message, "Execution context was destroyed"))
}
