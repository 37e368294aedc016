package main

import (
	"context"
	"errors"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kfn-dev/kfn/internal/auth"
	"github.com/kfn-dev/kfn/test/testcluster"
)

// identities are the sender namespaces of the hostile-tenant benchmark as
// a cluster has them: a real API server (test/testcluster) that issues
// each namespace's ServiceAccount a token of kfn's audience and reviews
// it, and the publisher's auth.Kubernetes that asks it, so that the
// publisher holds each namespace to its own bounds (events and bytes a
// second, its share of the publisher's work) as it does in a cluster.
type identities struct {
	cluster *testcluster.Cluster
	senders *auth.Kubernetes
	tokens  map[string]string // namespace -> token
	cancel  context.CancelFunc
}

// startIdentities starts the API server and gives each namespace a token.
func startIdentities(namespaces ...string) (*identities, error) {
	c, err := testcluster.Start()
	if err != nil {
		return nil, fmt.Errorf("start the API server for the senders' identities: %w", err)
	}
	id := &identities{cluster: c, tokens: map[string]string{}, cancel: func() {}}
	fail := func(err error) (*identities, error) { return nil, errors.Join(err, id.stop()) }
	client, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return fail(err)
	}
	ctx := context.Background()
	for _, ns := range namespaces {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return fail(fmt.Errorf("create namespace %s: %w", ns, err))
		}
		if _, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "publisher"}}, metav1.CreateOptions{}); err != nil {
			return fail(fmt.Errorf("create the ServiceAccount of %s: %w", ns, err))
		}
		tr, err := client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "publisher", &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{auth.Audience}, ExpirationSeconds: ptr.To[int64](24 * 3600)},
		}, metav1.CreateOptions{})
		if err != nil {
			return fail(fmt.Errorf("a token of %s: %w", ns, err))
		}
		id.tokens[ns] = tr.Status.Token
	}
	if id.senders, err = auth.NewKubernetes(client, auth.KubernetesConfig{}); err != nil {
		return fail(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	id.cancel = cancel
	go func() { _ = id.senders.Run(runCtx) }()
	return id, nil
}

// stop stops the API server.
func (id *identities) stop() error {
	id.cancel()
	return id.cluster.Stop()
}
