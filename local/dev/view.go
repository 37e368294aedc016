package dev

import (
	"context"
	"net/http"
	"slices"

	"github.com/kfn-dev/kfn/local/webview"
)

// ViewPath is where kfn dev serves its live web view (package webview):
// under AdminPrefix, which is no namespace name, so no function's route
// and none of the publisher's can collide with it.
const ViewPath = AdminPrefix + viewRoute

// viewRoute is ViewPath in the admin API.
const viewRoute = "/ui/"

// viewPlatform is what the web view shows of the platform: Status, in the
// view's types.
func (p *Platform) viewPlatform(context.Context) webview.Platform {
	st := p.Status()
	out := webview.Platform{
		Addr: st.Addr, Problems: st.Errors,
		Functions:     make([]webview.Function, 0, len(st.Functions)),
		Subscriptions: make([]webview.Subscription, 0, len(st.Subscriptions)),
	}
	for _, f := range st.Functions {
		out.Functions = append(out.Functions, webview.Function{
			Namespace: f.Namespace, Name: f.Name, Runtime: f.Runtime,
			Replicas: f.Replicas, Ready: f.Ready, Autoscaled: f.Autoscaled, Min: f.Min, Max: f.Max,
			Backlog: f.Backlog, InFlight: f.InFlight, Error: f.Error, Warnings: f.Warnings,
		})
	}
	for _, s := range st.Subscriptions {
		out.Subscriptions = append(out.Subscriptions, webview.Subscription{
			Namespace: s.Namespace, Name: s.Name, Sink: s.Sink, Types: s.Types, Ready: s.Ready,
			Backlog: s.Backlog, Delivered: s.Delivered, Failed: s.Failed, DeadLettered: s.DeadLettered,
		})
	}
	return out
}

// functionAt names the function ("namespace/name") one of whose processes
// listens on host, for the event recorder's links.
func (p *Platform) functionAt(host string) (string, bool) {
	for _, f := range p.runner.Functions() {
		if slices.Contains(f.Pool.Endpoints(), host) {
			return f.Plan.Namespace + "/" + f.Plan.Name, true
		}
	}
	return "", false
}

// route names the function a gateway request is for, for the event
// recorder's links.
func (p *Platform) route(r *http.Request) (string, bool) {
	fn, _, ok := p.gateway.Route(r)
	return fn.String(), ok
}

// redirectToView sends a browser that asks for kfn dev's admin root to the
// web view.
func redirectToView(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, ViewPath, http.StatusFound)
}
