package v1alpha2_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	. "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
)

func TestSetConditionComputesReady(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	var s SubscriptionStatus

	s.SetCondition(ConditionSubscriptionSpecValid, corev1.ConditionTrue, ReasonSpecValid, "", t0)
	assert.False(t, s.Ready, "not ready while a condition is missing")

	s.SetCondition(ConditionSubscriptionActive, corev1.ConditionTrue, ReasonNATSSubscriptionActive, "", t0)
	assert.True(t, s.Ready)

	s.SetCondition(ConditionSubscriptionActive, corev1.ConditionTrue, ReasonNATSSubscriptionActive, "still", t1)
	assert.Equal(t, t0, s.FindCondition(ConditionSubscriptionActive).LastTransitionTime, "same status keeps its transition time")
	assert.Equal(t, "still", s.FindCondition(ConditionSubscriptionActive).Message)

	s.SetCondition(ConditionSubscriptionSpecValid, corev1.ConditionFalse, ReasonSpecInvalid, "sink: service not found", t1)
	assert.False(t, s.Ready, "a False condition is never ready")
	assert.Equal(t, t1, s.FindCondition(ConditionSubscriptionSpecValid).LastTransitionTime)
	assert.Len(t, s.Conditions, 2)
	assert.Nil(t, s.FindCondition("other"))
}
