package kfndev_test

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/test/browsertest"
	"github.com/kfn-dev/kfn/test/testenv"
)

// ScreenshotEnv names a file TestWebView writes its screenshot to, besides
// the test's own directory: KFN_WEBVIEW_SCREENSHOT=docs/webview.png
// refreshes the README's picture.
const ScreenshotEnv = "KFN_WEBVIEW_SCREENSHOT"

var viewLine = regexp.MustCompile(`Web view: (http://\S+/_kfn/ui/) `)

// TestWebView opens kfn dev's web view in a real Chromium while the shop
// runs with a payments function that declines a flaky card and an
// invoices function that is not ready, and orders exposed by an
// APIRule, and follows an order through the page: orders shows its
// routes, the tables fill and update live, a declined payment is
// dead-lettered, its Replay button delivers it, and a screenshot shows it.
func TestWebView(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: builds and runs kfn dev and a browser")
	}
	chromium := testenv.LookPath(t, "chromium")
	testenv.LookPath(t, "node")
	testenv.LookPath(t, "python3")
	begin := time.Now()
	phase := func(name string) { t.Logf("%6.2fs %s", time.Since(begin).Seconds(), name) }

	dir := copyExample(t)
	for _, f := range []string{"payments.yaml", "invoices.yaml", "apirule.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata", "webview", f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), data, 0o644))
	}
	dev := startDev(t, dir)
	var m []string
	require.Eventually(t, func() bool { m = viewLine.FindStringSubmatch(dev.out.String()); return m != nil },
		10*time.Second, 10*time.Millisecond, "kfn dev prints where its web view is:\n%s", dev.out)
	url := m[1]
	assert.Equal(t, "http://"+dev.addr+"/_kfn/ui/", url)
	phase("kfn dev up")

	ctx := browsertest.Start(t, chromium)
	browsertest.Do(t, ctx, "open the view", chromedp.Navigate(url))
	browsertest.Do(t, ctx, "the page's script ran", chromedp.WaitVisible(chromedp.CSS(`#live[data-state="live"]`)))
	browsertest.Until(t, ctx, "the first state", `document.body.dataset.updates >= 1 && document.getElementById('live').dataset.state === 'live'`)
	phase("page loaded")
	// A mark on the window: it is gone if the page is ever reloaded.
	browsertest.Do(t, ctx, "mark the page", chromedp.Evaluate[chromedp.Void](`window.kfnTestMark = 1`))

	t.Run("functions show their state", func(t *testing.T) {
		states := browsertest.Do(t, ctx, "read the functions", chromedp.Evaluate[map[string]string](
			`Object.fromEntries([...document.querySelectorAll('#functions tbody tr')].map((tr) => [tr.dataset.key, tr.querySelector('td.state').textContent]))`))
		assert.Equal(t, map[string]string{
			"default/fulfil": "scaled to zero", "default/invoices": "not ready", "default/notify": "running",
			"default/orders": "running", "default/payments": "running",
		}, states)
		reason := browsertest.Do(t, ctx, "read why invoices is not ready", chromedp.Text(chromedp.CSS(`#functions tr[data-key="default/invoices"] .reason`)))
		assert.Equal(t, "ConfigurationReady: InvalidFunctionSpec: Function request memory(8Mi) should be higher than minimal value (16Mi)", reason)
	})

	t.Run("functions show their APIRules' routes", func(t *testing.T) {
		routes := browsertest.Do(t, ctx, "read orders' routes", chromedp.Evaluate[[]map[string]string](
			`[...document.querySelectorAll('#functions tr[data-key="default/orders"] .route')].map((r) => ({
				apiRule: r.dataset.apirule, text: r.textContent, href: r.querySelector('a') ? r.querySelector('a').href : ''}))`))
		_, port, _ := strings.Cut(dev.addr, ":")
		assert.Equal(t, []map[string]string{
			{"apiRule": "default/orders", "text": "GET orders.localhost/admin jwt", "href": "http://orders.localhost:" + port + "/admin"},
			{"apiRule": "default/orders", "text": "GET POST orders.localhost/api/{**} noAuth", "href": "http://orders.localhost:" + port + "/api/"},
		}, routes)
	})

	t.Run("an order travels the chain, live", func(t *testing.T) {
		assert.Equal(t, "0", browsertest.Do(t, ctx, "notify's count", chromedp.Text(chromedp.CSS(`#subscriptions tr[data-key="default/notify"] [data-field="delivered"]`))))
		code, err := postOrder(http.DefaultClient, dev.addr, "web-1")
		require.NoError(t, err)
		require.Equal(t, http.StatusAccepted, code)
		browsertest.Until(t, ctx, "the chain orders -> fulfil -> notify", `!!document.querySelector(
			'.event[data-id="order-web-1"][data-origin="emitted"] .delivery[data-subscription="default/fulfil"][data-outcome="delivered"]'
			+ ' .event[data-id="fulfilled-web-1"][data-origin="emitted"] .delivery[data-subscription="default/notify"][data-outcome="delivered"]')`)
		browsertest.Until(t, ctx, "notify's count", `document.querySelector('#subscriptions tr[data-key="default/notify"] [data-field="delivered"]').textContent === '1'`)
		phase("chain shown")
	})

	var seq string
	t.Run("a declined payment is dead-lettered", func(t *testing.T) {
		publishOrder(t, dev.addr, "web-2", `{"id":"web-2","item":"lamp","card":"flaky"}`)
		browsertest.Until(t, ctx, "the dead letter", `!!document.querySelector('#deadletters tr[data-seq] button.replay')
			&& document.querySelector('#deadletters tbody').textContent.includes('web-2')`)
		browsertest.Until(t, ctx, "the event's path", `!!document.querySelector(
			'.event[data-id="web-2"] .delivery[data-subscription="default/payments"][data-outcome="dead-lettered"]')`)
		browsertest.Until(t, ctx, "the counts", `document.querySelector('#subscriptions tr[data-key="default/payments"] [data-field="dead-lettered"]').textContent === '1'
			&& document.querySelector('#subscriptions tr[data-key="default/payments"] [data-field="failed"]').textContent === '2'`)
		seq = browsertest.Do(t, ctx, "the dead letter's sequence", chromedp.Evaluate[string](`document.querySelector('#deadletters tr[data-seq]').dataset.seq`))
		why := browsertest.Do(t, ctx, "why", chromedp.Text(chromedp.CSS(`#deadletters tr[data-seq] .reason`)))
		assert.Equal(t, "sink answered 500 Internal Server Error", why)
		phase("dead letter shown")
	})

	t.Run("the screenshot shows the view", func(t *testing.T) {
		shot := browsertest.Do(t, ctx, "screenshot", chromedp.FullScreenshot(100))
		require.NoError(t, os.WriteFile(filepath.Join(t.TempDir(), "webview.png"), shot, 0o644))
		if out := os.Getenv(ScreenshotEnv); out != "" {
			require.NoError(t, os.WriteFile(out, shot, 0o644))
		}
		cards := browsertest.Do(t, ctx, "where the cards are", chromedp.Evaluate[map[string]rect](`Object.fromEntries(
			['functions-card', 'subscriptions-card', 'deadletters-card', 'events-card'].map((id) => {
				const r = document.getElementById(id).getBoundingClientRect();
				return [id, {x: r.x + window.scrollX, y: r.y + window.scrollY, w: r.width, h: r.height}];
			}))`))
		checkScreenshot(t, shot, cards)
		phase("screenshot checked")
	})

	t.Run("Replay delivers the dead letter", func(t *testing.T) {
		defer func() {
			if t.Failed() { // seen once under go test ./...'s load (2026-11-30): what the page and kfn dev said
				shown, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll('#deadletters .replay-error, #deadletters button.replay')).map((e) => e.textContent).join(' | ')`))
				t.Logf("the page's dead letters: %s\nkfn dev's last lines:\n%s", shown, lastLines(dev.out.String(), 40))
			}
		}()
		// Found and clicked in one step: the table is drawn anew on every
		// update of the page's event stream, and a node found by one call
		// and clicked by the next can be gone between them (chromedp's
		// Click: "Could not find node with given id").
		clicked := browsertest.Do(t, ctx, "click Replay", chromedp.Evaluate[bool](`(() => {
			const b = document.querySelector('#deadletters tr[data-seq="`+seq+`"] button.replay');
			if (!b) return false;
			b.click();
			return true;
		})()`))
		require.True(t, clicked, "the Replay button of dead letter %s is there", seq)
		browsertest.Until(t, ctx, "the dead letter gone", `!document.querySelector('#deadletters tr[data-seq]')`)
		browsertest.Until(t, ctx, "the replay delivered", `!!document.querySelector(
			'.event[data-id="web-2"] .event[data-origin="replay"][data-id="web-2"] .delivery[data-subscription="default/payments"][data-outcome="delivered"]')`)
		browsertest.Until(t, ctx, "payments' count", `document.querySelector('#subscriptions tr[data-key="default/payments"] [data-field="delivered"]').textContent === '2'`)
		assert.Contains(t, dev.out.String(), "charged order web-2")
		phase("replayed")
	})

	assert.Equal(t, 1, browsertest.Do(t, ctx, "the mark", chromedp.Evaluate[int](`window.kfnTestMark`)), "the page was never reloaded: it changed through its event stream")
	phase("done")
}

// rect is an element's box on the page, in CSS pixels.
type rect struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
	W float64 `json:"w"`
	H float64 `json:"h"`
}

// checkScreenshot decodes the PNG and checks that it is the page: as wide as
// the window, not blank, the dark header on top, and in each card text (dark
// pixels) on white; the not-ready badge in the functions card and the
// Replay button in the dead letters card in their colours.
func checkScreenshot(t *testing.T, shot []byte, cards map[string]rect) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(shot))
	require.NoError(t, err, "a PNG")
	b := img.Bounds()
	assert.Equal(t, 1280, b.Dx(), "as wide as the window")
	assert.GreaterOrEqual(t, b.Dy(), 900, "the whole page")
	colours := map[color.RGBA]bool{}
	for y := b.Min.Y; y < b.Max.Y; y += 3 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			colours[rgba(img, x, y)] = true
		}
	}
	assert.Greater(t, len(colours), 100, "not blank: text, badges and lines in many shades")
	assert.True(t, dark(rgba(img, 5, 5)), "the header is dark")

	require.Len(t, cards, 4)
	for id, r := range cards {
		box := image.Rect(int(r.X), int(r.Y), int(r.X+r.W), int(r.Y+r.H)).Intersect(b)
		require.False(t, box.Empty(), "%s is in the screenshot", id)
		var white, ink int
		for y := box.Min.Y; y < box.Max.Y; y++ {
			for x := box.Min.X; x < box.Max.X; x++ {
				c := rgba(img, x, y)
				switch {
				case c.R > 250 && c.G > 250 && c.B > 250:
					white++
				case dark(c):
					ink++
				}
			}
		}
		area := box.Dx() * box.Dy()
		assert.Greater(t, white, area/2, "%s is a white card", id)
		assert.Greater(t, ink, 200, "%s has text", id)
	}
	assert.Positive(t, count(img, cards["functions-card"], color.RGBA{0xb4, 0x23, 0x18, 0xff}), "the not-ready badge and reason, in red")
	assert.Positive(t, count(img, cards["deadletters-card"], color.RGBA{0x2f, 0x5b, 0xea, 0xff}), "the Replay button, in blue")
	assert.Positive(t, count(img, cards["events-card"], color.RGBA{0xe3, 0xf5, 0xec, 0xff}), "delivered badges, in green")
}

func rgba(img image.Image, x, y int) color.RGBA {
	r, g, b, a := img.At(x, y).RGBA()
	return color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), uint8(a >> 8)}
}

func dark(c color.RGBA) bool { return int(c.R)+int(c.G)+int(c.B) < 3*90 }

// count counts the pixels of colour c (within 8 per channel) in r.
func count(img image.Image, r rect, c color.RGBA) int {
	n := 0
	near := func(a, b uint8) bool { return a-b < 8 || b-a < 8 }
	box := image.Rect(int(r.X), int(r.Y), int(r.X+r.W), int(r.Y+r.H)).Intersect(img.Bounds())
	for y := box.Min.Y; y < box.Max.Y; y++ {
		for x := box.Min.X; x < box.Max.X; x++ {
			p := rgba(img, x, y)
			if near(p.R, c.R) && near(p.G, c.G) && near(p.B, c.B) {
				n++
			}
		}
	}
	return n
}

// publishOrder publishes an order.created.v1 event from source shop.
func publishOrder(t *testing.T, addr, id, data string) {
	t.Helper()
	publishEvent(t, addr, "order.created.v1", "shop", id, data)
}

// publishEvent publishes, anonymously as the user does, an event of type
// and source with id and data (JSON) to kfn dev at addr, and requires
// that it is stored (204).
func publishEvent(t *testing.T, addr, eventType, source, id, data string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/publish", strings.NewReader(data))
	require.NoError(t, err)
	for k, v := range map[string]string{"Content-Type": "application/json", "Ce-Specversion": "1.0", "Ce-Type": eventType, "Ce-Source": source, "Ce-Id": id} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode, fmt.Sprintf("publish %s", id))
}
