package dev

import (
	"fmt"
	"sort"

	gatewayv2 "github.com/kfn-dev/kfn/api/gateway/v2"
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
