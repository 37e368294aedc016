package depcache

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/token/cache"
	"k8s.io/apiserver/plugin/pkg/authenticator/token/webhook"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
)

// ErrNotAWriter is wrapped by the errors of Writers.WriterNamespace for a
// token that may not store the object it was sent for.
var ErrNotAWriter = errors.New("not a writer of these dependencies")

// Writers tells who may store an object: WriterNamespace returns the
// namespace of the ServiceAccount whose token token is, when the cluster
// confirms the token was made for audience (and not only for another
// audience, the API server's included) and is bound to a pod; an error
// wrapping ErrNotAWriter otherwise, or another error when the cluster
// could not be asked. *TokenReviews implements it.
type Writers interface {
	WriterNamespace(ctx context.Context, token, audience string) (string, error)
}

// A namespace's uploads, each of which may cost a TokenReview of its
// writer token: namespaceUploadsPerSecond, in bursts of
// namespaceUploadsBurst (the pods of a scale-out that all missed the same
// set). More are answered 429 before any review, so that a tenant's code,
// which holds its pod's identity token, cannot have made-up writer tokens
// reviewed at the API server's or other namespaces' expense.
const (
	namespaceUploadsPerSecond = 2.0
	namespaceUploadsBurst     = 20
)

// podNameExtra is the key of a TokenReview's user extra that names the pod
// a token is bound to (a projected token the kubelet asked for).
const podNameExtra = "authentication.kubernetes.io/pod-name"

// TokenReviews is Writers through the API server's TokenReview, with the
// audience asked: the answers are cached for ttl (a refusal for a tenth of
// it), so a token is reviewed once, not at each upload. Its identity needs
// create on tokenreviews.authentication.k8s.io (the ClusterRole
// system:auth-delegator).
type TokenReviews struct {
	tokens authenticator.Token
}

var _ Writers = (*TokenReviews)(nil)

// NewTokenReviews returns the TokenReviews of client, each bounded by 10
// s and tried again on errors of the API server as k8s.io/apiserver's
// delegating authenticator does.
func NewTokenReviews(client authenticationv1client.AuthenticationV1Interface, ttl time.Duration) (*TokenReviews, error) {
	if client == nil || ttl <= 0 {
		return nil, fmt.Errorf("%w: token reviews need a client and a positive cache time", ErrInvalidConfig)
	}
	none := webhook.AuthenticatorMetrics{
		RecordRequestTotal:   func(context.Context, string) {},
		RecordRequestLatency: func(context.Context, string, float64) {},
	}
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
	reviews, err := webhook.NewFromInterface(client, nil, backoff, 10*time.Second, none)
	if err != nil {
		return nil, fmt.Errorf("token reviews: %w", err)
	}
	return &TokenReviews{tokens: cache.New(reviews, false, ttl, ttl/10)}, nil
}

// WriterNamespace implements Writers.
func (t *TokenReviews) WriterNamespace(ctx context.Context, token, audience string) (string, error) {
	resp, ok, err := t.tokens.AuthenticateToken(authenticator.WithAudiences(ctx, authenticator.Audiences{audience}), token)
	if err != nil {
		return "", fmt.Errorf("review the writer token: %w", err)
	}
	if !ok {
		return "", fmt.Errorf("%w: the cluster does not know the token, or it was not made for %s", ErrNotAWriter, audience)
	}
	namespace, _, err := serviceaccount.SplitUsername(resp.User.GetName())
	if err != nil {
		return "", fmt.Errorf("%w: the token is not a ServiceAccount's", ErrNotAWriter)
	}
	if len(resp.User.GetExtra()[podNameExtra]) == 0 {
		return "", fmt.Errorf("%w: the token is bound to no pod", ErrNotAWriter)
	}
	return namespace, nil
}
