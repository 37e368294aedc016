// Package webview is kfn dev's live web view: one page, served by kfn dev
// itself, that shows the functions (replicas and state, why one is not
// ready, and the APIRule rules that reach it), the Subscriptions (backlog, delivered, failed and dead-lettered
// counts), the recent events with their path through the chain (from
// package eventpath) and the dead letters, each with a button that replays
// it. The page is plain HTML, CSS and JavaScript embedded in the binary, with
// no build step and nothing loaded from elsewhere; it stays current through
// one Server-Sent Events stream, on which the view sends the whole state
// when it changed, at most every MinInterval.
package webview
