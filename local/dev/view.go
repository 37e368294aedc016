package dev

import (
	"net/http"
	"slices"
	"strings"

	"github.com/kfn-dev/kfn/local/webview"
)

var _ webview.Source = (*Platform)(nil)

// ViewPath is where kfn dev serves its live web view (package webview):
// under AdminPrefix, which is no namespace name, so no function's route
// and none of the publisher's can collide with it.
const ViewPath = AdminPrefix + viewRoute

// viewRoute is ViewPath in the admin API.
const viewRoute = "/ui/"

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

// namespaceAt names the namespace of the function listening on host.
func (p *Platform) namespaceAt(host string) (string, bool) {
	fn, ok := p.functionAt(host)
	namespace, _, _ := strings.Cut(fn, "/")
	return namespace, ok
}

// route names the function a gateway request is for, for the event
// recorder's links.
func (p *Platform) route(r *http.Request) (string, bool) {
	fn, _, ok := p.bridge.Gateway.Route(r)
	return fn.String(), ok
}

// redirectToView sends a browser that asks for kfn dev's admin root to the
// web view.
func redirectToView(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, ViewPath, http.StatusFound)
}
