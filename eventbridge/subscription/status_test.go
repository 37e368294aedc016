package subscription_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge/subscription"
)

func TestStatus(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	sub := &v1alpha2.Subscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "s"},
		Spec:       v1alpha2.SubscriptionSpec{Source: "shop", Types: []string{"order created.v1", "order.paid.v1"}},
	}
	tests := map[string]struct {
		obs        subscription.Observation
		wantReady  bool
		wantSpec   corev1.ConditionStatus
		wantActive corev1.ConditionStatus
		wantMsg    string
		wantBacked bool
	}{
		"active": {
			obs:       subscription.Observation{Consumer: "kfn-x"},
			wantReady: true, wantSpec: corev1.ConditionTrue, wantActive: corev1.ConditionTrue, wantBacked: true,
		},
		"wrong sink, consumer kept": {
			obs:      subscription.Observation{SpecError: errors.New(`spec.sink: Service "fn" does not exist`), Consumer: "kfn-x"},
			wantSpec: corev1.ConditionFalse, wantActive: corev1.ConditionFalse, wantMsg: `events published meanwhile wait in consumer kfn-x`, wantBacked: true,
		},
		"invalid types, no consumer": {
			obs:      subscription.Observation{SpecError: errors.New(`invalid event type`)},
			wantSpec: corev1.ConditionFalse, wantActive: corev1.ConditionFalse, wantMsg: "events published meanwhile are not kept",
		},
		"over the namespace's limits": {
			obs:      subscription.Observation{Limited: fmt.Errorf("%w: 100 made before", subscription.ErrNamespaceLimit)},
			wantSpec: corev1.ConditionTrue, wantActive: corev1.ConditionFalse, wantMsg: "namespace's limit of Subscriptions reached: 100 made before",
		},
		"over the namespace's limits, wrong sink": {
			obs:      subscription.Observation{Limited: fmt.Errorf("%w: 100 made before", subscription.ErrNamespaceLimit), SpecError: errors.New("spec.sink: no")},
			wantSpec: corev1.ConditionFalse, wantActive: corev1.ConditionFalse, wantMsg: "namespace's limit of Subscriptions reached",
		},
		"consumer failed": {
			obs:      subscription.Observation{ConsumerError: errors.New("nats: timeout")},
			wantSpec: corev1.ConditionTrue, wantActive: corev1.ConditionFalse, wantMsg: "nats: timeout",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s := subscription.Status(sub, tt.obs, t0)
			assert.Equal(t, tt.wantReady, s.Ready)
			assert.Equal(t, []v1alpha2.EventType{
				{OriginalType: "order created.v1", CleanType: "ordercreated.v1"},
				{OriginalType: "order.paid.v1", CleanType: "order.paid.v1"},
			}, s.Types)
			spec := s.FindCondition(v1alpha2.ConditionSubscriptionSpecValid)
			active := s.FindCondition(v1alpha2.ConditionSubscriptionActive)
			assert.Equal(t, tt.wantSpec, spec.Status)
			assert.Equal(t, tt.wantActive, active.Status)
			assert.Contains(t, spec.Message+active.Message, tt.wantMsg)
			if tt.wantBacked {
				assert.Equal(t, []v1alpha2.JetStreamTypes{{OriginalType: "order created.v1", ConsumerName: "kfn-x"}, {OriginalType: "order.paid.v1", ConsumerName: "kfn-x"}}, s.Backend.Types)
			} else {
				assert.Empty(t, s.Backend.Types)
			}
		})
	}

	// Transition times move only when a status changes.
	sub.Status = subscription.Status(sub, subscription.Observation{Consumer: "kfn-x"}, t0)
	again := subscription.Status(sub, subscription.Observation{Consumer: "kfn-x"}, t1)
	assert.Equal(t, sub.Status, again, "nothing changed, nothing to write")
	broken := subscription.Status(sub, subscription.Observation{ConsumerError: errors.New("x")}, t1)
	assert.Equal(t, sub.Status.Backend.Types, broken.Backend.Types, "the consumer's name is kept through an error: it says a consumer existed")
	assert.Equal(t, t0, broken.FindCondition(v1alpha2.ConditionSubscriptionSpecValid).LastTransitionTime)
	assert.Equal(t, t1, broken.FindCondition(v1alpha2.ConditionSubscriptionActive).LastTransitionTime)
}

// TestStatusAfterALoss: a lost consumer makes the condition "Events kept"
// False, without changing ready, for EventsLostFor; then it goes.
func TestStatusAfterALoss(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	sub := &v1alpha2.Subscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "s"},
		Spec:       v1alpha2.SubscriptionSpec{Source: "shop", Types: []string{"order.paid.v1"}},
	}
	sub.Status = subscription.Status(sub, subscription.Observation{Consumer: "kfn-x", Created: true, Lost: true}, t0)
	assert.True(t, sub.Status.Ready, "a loss of the past does not stop delivery")
	c := sub.Status.FindCondition(v1alpha2.ConditionEventsKept)
	require.NotNil(t, c)
	assert.Equal(t, corev1.ConditionFalse, c.Status)
	assert.Equal(t, v1alpha2.ReasonConsumerLost, c.Reason)
	assert.Contains(t, c.Message, "kfn-x")

	later := metav1.NewTime(t0.Add(subscription.EventsLostFor - time.Second))
	sub.Status = subscription.Status(sub, subscription.Observation{Consumer: "kfn-x"}, later)
	assert.NotNil(t, sub.Status.FindCondition(v1alpha2.ConditionEventsKept), "kept for a day")
	end := metav1.NewTime(t0.Add(subscription.EventsLostFor))
	sub.Status = subscription.Status(sub, subscription.Observation{Consumer: "kfn-x"}, end)
	assert.Nil(t, sub.Status.FindCondition(v1alpha2.ConditionEventsKept), "then it goes")
	assert.True(t, sub.Status.Ready)
}
