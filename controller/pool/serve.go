package pool

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kfn-dev/kfn/contract/claim"
)

// Handler serves the claims of package contract/claim: POST of a
// Function's claim path, from a caller allow lets claim a pod for that
// Function (allow's error is answered 403), answered with Claim's pod and
// address, or with the status of Claim's error; POST of claim.WarmPath is
// answered 204 when allow lets the caller claim for every Function
// (namespace and name empty), 403 when not, and claims nothing. A claim is bounded by
// ClaimTimeout; the caller leaving ends its wait, not the claim.
func (p *Pool) Handler(allow func(r *http.Request, namespace, name string) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "claims are POSTed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == claim.WarmPath {
			// Checked as a claim for every Function is: the caller's
			// review is then held for its next claim.
			if err := allow(r, "", ""); err != nil {
				http.Error(w, err.Error(), http.StatusForbidden)
				return
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
		namespace, name, err := claim.ParsePath(r.URL.Path)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		if err := allow(r, namespace, name); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), p.cfg.ClaimTimeout)
		defer cancel()
		got, err := p.Claim(ctx, types.NamespacedName{Namespace: namespace, Name: name})
		if err != nil {
			code := claim.StatusOf(err)
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				code = http.StatusGatewayTimeout
			}
			http.Error(w, err.Error(), code)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(claim.Answer{Pod: got.Pod, Address: got.Address})
	})
}
