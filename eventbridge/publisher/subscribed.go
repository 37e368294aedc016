package publisher

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// SubscribedFresh is how long GET /{app}/v1/events/subscribed answers from
// one list of the Subscriptions: a Subscription made, changed or deleted
// is in the answers within it.
const SubscribedFresh = time.Second

// subscribedView answers GET /{app}/v1/events/subscribed from one list of
// the Subscriptions, taken at most once per SubscribedFresh however many
// requests come, one request at a time: a flood of requests costs a list
// and an index of it a second (subscribedIndex) and a look at the types
// that can be the application's per request, not a list of every
// Subscription, nor a look through them, per request.
type subscribedView struct {
	lister SubscriptionLister
	prefix string
	turn   chan struct{} // one request at a time

	taken time.Time
	index subscribedIndex
}

func newSubscribedView(l SubscriptionLister, prefix string) *subscribedView {
	return &subscribedView{lister: l, prefix: prefix, turn: make(chan struct{}, 1)}
}

// events returns the legacy events of app that some Subscription asks for
// (subscribedIndex.events), as of a list at most SubscribedFresh old. It
// returns ctx's error if ctx ends while it waits for its turn, or why the
// Subscriptions could not be listed.
func (v *subscribedView) events(ctx context.Context, app string) ([]SubscribedEvent, error) {
	select {
	case v.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("wait to list subscribed events: %w", ctx.Err())
	}
	defer func() { <-v.turn }()
	if v.taken.IsZero() || time.Since(v.taken) >= SubscribedFresh {
		subs, err := v.lister.ListSubscriptions(ctx)
		if err != nil {
			return nil, err
		}
		v.index, v.taken = subscribedByApp(v.prefix, subs), time.Now()
	}
	return v.index.events(app), nil
}

// serveSubscribed answers GET /{app}/v1/events/subscribed.
func (p *Publisher) serveSubscribed(w http.ResponseWriter, r *http.Request) {
	var events []SubscribedEvent
	if p.subscribed != nil {
		var err error
		if events, err = p.subscribed.events(r.Context(), r.PathValue("app")); err != nil {
			p.log.Warn("list subscriptions failed", "error", err)
			writeJSON(w, http.StatusInternalServerError, map[string]any{"code": http.StatusInternalServerError, "error": err.Error()})
			p.metrics.request("subscribed", http.StatusInternalServerError)
			return
		}
	}
	if events == nil {
		events = []SubscribedEvent{} // [], as Kyma answers, not null
	}
	writeJSON(w, http.StatusOK, SubscribedEvents{EventsInfo: events})
	p.metrics.request("subscribed", http.StatusOK)
}
