package publisher

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
)

// scanSubscribed is the answer of GET /{app}/v1/events/subscribed by a
// look through every Subscription (how it was answered before
// subscribedByApp): the oracle the index is held to.
func scanSubscribed(prefix, app string, subs []v1alpha2.Subscription) []SubscribedEvent {
	var out []SubscribedEvent
	for i := range subs {
		s := &subs[i]
		for _, t := range s.Spec.Types {
			switch {
			case s.Matching() == v1alpha2.TypeMatchingExact && strings.HasPrefix(t, prefix+"."+app+"."):
				t = strings.TrimPrefix(t, prefix+"."+app+".")
			case s.Matching() == v1alpha2.TypeMatchingStandard && s.Spec.Source == app:
			default:
				continue
			}
			if i := strings.LastIndex(t, "."); i > 0 {
				out = append(out, SubscribedEvent{Name: t[:i], Version: t[i+1:]})
			}
		}
	}
	slices.SortFunc(out, func(a, b SubscribedEvent) int {
		return strings.Compare(a.Name+"\x00"+a.Version, b.Name+"\x00"+b.Version)
	})
	return slices.Compact(out)
}

// TestSubscribedByAppAnswersAsALookThroughAll: for Subscriptions of both
// matchings, with application names and types full of dots (an exact type
// a.b.order.created.v1 is application a's b.order.created and
// application a.b's order.created), empty parts, repeated types and types
// of other prefixes, the index answers every application as a look
// through every Subscription does, sorted and without repeats.
func TestSubscribedByAppAnswersAsALookThroughAll(t *testing.T) {
	const prefix = "sap.kyma.custom"
	r := rand.New(rand.NewPCG(1, 2))
	parts := []string{"a", "b", "a.b", "", "order", "created", "v1", "v2", "x.y.z"}
	word := func() string {
		n := 1 + r.IntN(4)
		w := make([]string, n)
		for i := range w {
			w[i] = parts[r.IntN(len(parts))]
		}
		return strings.Join(w, ".")
	}
	apps := map[string]bool{"": true, "nobody": true}
	var subs []v1alpha2.Subscription
	for i := range 300 {
		s := v1alpha2.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("s", i)}}
		switch i % 3 {
		case 0:
			s.Spec.TypeMatching = v1alpha2.TypeMatchingExact
		case 1:
			s.Spec.TypeMatching = v1alpha2.TypeMatchingStandard
		} // else: unset, which is standard
		s.Spec.Source = word()
		apps[s.Spec.Source] = true
		for range 1 + r.IntN(4) {
			typ := word()
			if r.IntN(3) > 0 {
				typ = prefix + "." + typ
			}
			s.Spec.Types = append(s.Spec.Types, typ)
			for k, c := range typ {
				if c == '.' {
					apps[typ[:k]] = true
					apps[strings.TrimPrefix(typ[:k], prefix+".")] = true
				}
			}
		}
		subs = append(subs, s)
	}
	index := subscribedByApp(prefix, subs)
	answered := 0
	for app := range apps {
		want := scanSubscribed(prefix, app, subs)
		assert.Equal(t, want, index.events(app), "application %q", app)
		if len(want) > 0 {
			answered++
		}
	}
	assert.Greater(t, answered, 10, "the test asks applications that have events")
	entries := 0
	for _, ts := range index.standard {
		entries += len(ts)
	}
	for _, ts := range index.exact {
		entries += len(ts)
	}
	types := 0
	for _, s := range subs {
		types += len(s.Spec.Types)
	}
	assert.LessOrEqual(t, entries, types, "at most an entry per type, whatever its dots")
}

// BenchmarkSubscribedAnswer is one answer of GET /{app}/v1/events/subscribed
// in a cluster of 10,000 Subscriptions of 5 types each (the list and its
// index are taken at most once a second, whatever the requests): a look
// at the application's 500 types in the index, against the look through
// every Subscription (scan) it replaced.
func BenchmarkSubscribedAnswer(b *testing.B) {
	subs := make([]v1alpha2.Subscription, 10_000)
	for i := range subs {
		subs[i].Spec.Source = fmt.Sprint("app", i%100)
		for k := range 5 {
			subs[i].Spec.Types = append(subs[i].Spec.Types, fmt.Sprintf("order%d.created%d.v1", i, k))
		}
	}
	index := subscribedByApp("sap.kyma.custom", subs)
	b.Run("index", func(b *testing.B) {
		for b.Loop() {
			_ = index.events("app7")
		}
	})
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			_ = scanSubscribed("sap.kyma.custom", "app7", subs)
		}
	})
}
