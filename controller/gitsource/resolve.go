package gitsource

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"

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
// be one policy allows (errors wrap egress.ErrRefused otherwise). Errors
// wrap ErrReferenceNotFound when the server answered but has no such
// reference.
func Resolve(ctx context.Context, url, reference string, auth transport.AuthMethod, policy egress.Policy) (string, error) {
	reference = strings.TrimSpace(reference)
	if commitHash.MatchString(reference) {
		return strings.ToLower(reference), nil
	}
	name := url
	ctx, url, auth, err := useEgress(ctx, policy, url, auth)
	if err != nil {
		return "", fmt.Errorf("list references of %s: %w", name, err)
	}
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{url}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: auth, PeelingOption: git.AppendPeeled})
	if err != nil {
		return "", fmt.Errorf("list references of %s: %w", name, err)
	}
	byName := make(map[plumbing.ReferenceName]*plumbing.Reference, len(refs))
	for _, r := range refs {
		byName[r.Name()] = r
	}
	candidates := []string{reference, "refs/heads/" + reference, "refs/tags/" + reference}
	for _, name := range candidates {
		// An annotated tag's peeled entry (name^{}) names the commit.
		if r, ok := byName[plumbing.ReferenceName(name+"^{}")]; ok {
			return r.Hash().String(), nil
		}
		r, ok := byName[plumbing.ReferenceName(name)]
		if !ok {
			continue
		}
		if r.Type() == plumbing.SymbolicReference {
			if t, ok := byName[r.Target()]; ok {
				return t.Hash().String(), nil
			}
			continue
		}
		return r.Hash().String(), nil
	}
	return "", fmt.Errorf("%w: %s has no branch or tag %q", ErrReferenceNotFound, name, reference)
}
