package gitsource

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"

	"github.com/kfn-dev/kfn/internal/egress"
)

// ErrReferenceNotFound is wrapped by Resolve when the repository has no
// such branch or tag.
var ErrReferenceNotFound = errors.New("reference not found")

// commitHash is a full commit hash, in either case (as Kyma accepts it).
var commitHash = regexp.MustCompile(`^[0-9a-fA-F]{40}$`)

// Resolve returns the commit hash reference names in the repository at
// url, asking the server for its references (git ls-remote), without
// cloning. reference may be a branch, a tag (annotated tags are peeled to
// their commit), a full ref name (refs/...), HEAD, or a full 40-character
// commit hash in either case, which is returned as it is, lower-case,
// without asking the server (an abbreviated hash is looked up as a name).
// auth may be nil. The server, and every address a redirect leads to, must
// be one policy allows (errors wrap egress.ErrRefused otherwise). Resolve
// returns when ctx ends, whatever step it is at (over SSH and git:// it
// closes the connection; over HTTP the request ends). It reads at most
// MaxReferenceListBytes from the server (errors wrap
// ErrReferencesTooLarge past it). Errors wrap ErrReferenceNotFound when
// the server answered but has no such reference.
func Resolve(ctx context.Context, url, reference string, auth transport.AuthMethod, policy egress.Policy) (string, error) {
	reference = strings.TrimSpace(reference)
	if commitHash.MatchString(reference) {
		return strings.ToLower(reference), nil
	}
	budget := newReadBudget(MaxReferenceListBytes)
	ar, err := listReferences(ctx, url, auth, policy, budget)
	if err != nil {
		// go-git's decoder may keep only the text of the budget's error.
		if berr := budget.err(); berr != nil {
			err = berr
		}
		return "", fmt.Errorf("list references of %s: %w", url, err)
	}
	for _, name := range []string{reference, "refs/heads/" + reference, "refs/tags/" + reference} {
		// An annotated tag's peeled entry (name^{}) names the commit.
		if h, ok := ar.Peeled[name]; ok {
			return h.String(), nil
		}
		if name == "HEAD" && ar.Head != nil {
			return ar.Head.String(), nil
		}
		if h, ok := ar.References[name]; ok {
			return h.String(), nil
		}
	}
	return "", fmt.Errorf("%w: %s has no branch or tag %q", ErrReferenceNotFound, url, reference)
}

// listReferences returns the reference list the server at url advertises
// (git ls-remote's), reading at most what budget allows. The list is
// looked up as go-git decoded it, not copied into more maps: what it costs
// in memory is the decoder's.
func listReferences(ctx context.Context, url string, auth transport.AuthMethod, policy egress.Policy,
	budget *readBudget) (*packp.AdvRefs, error) {
	ep, err := transport.NewEndpoint(url)
	if err != nil {
		return nil, fmt.Errorf("repository URL %s: %w", url, err)
	}
	if ep.Protocol == "ssh" || ep.Protocol == "git" {
		addr, err := serverAddress(ctx, policy, ep)
		if err != nil {
			return nil, err
		}
		return listOverConn(ctx, ep, addr, auth, policy, budget)
	}
	ctx, url, auth, err = useEgress(ctx, policy, url, auth)
	if err != nil {
		return nil, err
	}
	if ep, err = transport.NewEndpoint(url); err != nil {
		return nil, fmt.Errorf("repository URL %s: %w", url, err)
	}
	ctx = context.WithValue(ctx, budgetKey{}, budget)
	c, err := client.NewClient(ep)
	if err != nil {
		return nil, fmt.Errorf("repository URL %s: %w", url, err)
	}
	session, err := c.NewUploadPackSession(ep, auth)
	if err != nil {
		return nil, err
	}
	defer session.Close()
	return session.AdvertisedReferencesContext(ctx)
}
