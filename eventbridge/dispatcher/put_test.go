package dispatcher_test

import (
	"context"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/kfn-dev/kfn/eventbridge/eventstore"
)

// put stores e in its stored form as the publisher does (without its
// admission), routed by route ("" its own source), with traceParent as
// the trace context of the request that carried it.
func put(ctx context.Context, s *eventstore.Store, e *event.Event, route, traceParent string) (eventstore.Result, error) {
	stored, err := eventstore.Encode(e, traceParent, "")
	if err != nil {
		return eventstore.Result{}, err
	}
	stored.SetRoute(route)
	return s.Put(ctx, stored)
}
