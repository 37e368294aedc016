// Package browsertest drives a real headless Chromium in tests of kfn's
// web views (kfn dev's, and kfn view's of a cluster) through chromedp: a
// browser of its own per test, actions bounded in time, and waits for a
// condition on a page that changes through its event stream.
package browsertest
