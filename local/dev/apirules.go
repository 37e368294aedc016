package dev

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/types"

	gatewayv2 "github.com/kfn-dev/kfn/api/gateway/v2"
	"github.com/kfn-dev/kfn/eventbridge/gateway"
	"github.com/kfn-dev/kfn/local/devstatus"
)

// serveAPIRules has the gateway serve rules, the project's APIRules, on
// kfn dev's port (by Host: a short host my-function is
// my-function.localhost), and returns a problem for each APIRule that is
// not served as written, sorted: "APIRule ns/name: Error: why".
func (p *Platform) serveAPIRules(rules []*gatewayv2.APIRule) []string {
	var problems []string
	for key, st := range p.bridge.Gateway.SetAPIRules(rules) {
		if st.State != gatewayv2.StateReady {
			problems = append(problems, fmt.Sprintf("APIRule %s: %s: %s", key, st.State, st.Description))
		}
	}
	sort.Strings(problems)
	return problems
}

// routesByFunction groups the gateway's routes by the Function they
// reach: a Function's Service on port 80 (kfn dev runs no other
// Service, so a route to another reaches nothing and is not shown).
func routesByFunction(routes []gateway.ExposedRoute) map[types.NamespacedName][]devstatus.Route {
	out := map[types.NamespacedName][]devstatus.Route{}
	for _, r := range routes {
		if r.Port != gateway.FunctionPort {
			continue
		}
		out[r.Service] = append(out[r.Service], devstatus.Route{APIRule: r.APIRule.String(), Hosts: r.Hosts,
			Path: r.Path, Methods: r.Methods, Access: r.Access, Refused: r.Refused})
	}
	return out
}
