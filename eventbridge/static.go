package eventbridge

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/api/manifest"
)

// loadSubscriptions reads Subscriptions from manifest files, admitted as the
// API server would; any invalid document is an error.
func loadSubscriptions(ctx context.Context, files []string) ([]*v1alpha2.Subscription, error) {
	admitter, err := manifest.NewAdmitter()
	if err != nil {
		return nil, err
	}
	var docs []manifest.Document
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read subscriptions: %w", err)
		}
		d, err := manifest.Decode(f, data)
		if err != nil {
			return nil, err
		}
		docs = append(docs, d...)
	}
	set := admitter.Load(ctx, docs)
	if len(set.Invalid) > 0 {
		return nil, errors.Join(set.Invalid...)
	}
	for _, s := range set.Subscriptions {
		if s.Namespace == "" {
			s.Namespace = "default"
		}
	}
	return set.Subscriptions, nil
}
