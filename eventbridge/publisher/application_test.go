package publisher_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/applications"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
)

// kymaApplications holds the Applications of these tests as Kyma's
// Application Connector makes them: one with an application-type label
// (in another case, which Kyma also reads), one without. It reads them as
// applications.Watcher does (applications.TypeOrName); the Watcher's own
// following of a cluster is tested in its package.
func kymaApplications() applicationLabels {
	return applicationLabels{
		"commerce-prod": {"Application-Type": "commerce", "team": "shop"},
		"my_billing":    nil,
	}
}

// applicationLabels are Applications by name, with their labels.
type applicationLabels map[string]map[string]string

func (a applicationLabels) TypeOrName(name string) (string, bool) {
	labels, ok := a[name]
	if !ok {
		return "", false
	}
	return applications.TypeOrName(name, labels), true
}

// TestLegacyPublishApplicationType follows Kyma's publisher for a legacy
// event of an application that has an Application CR: the standard copy
// keeps the application as its source but is routed by the Application's
// application-type label (kyma.<type>.<event>.<version>); the exact copy's
// legacy type names the type. An Application without the label, and an
// application without an Application, go by their name.
func TestLegacyPublishApplicationType(t *testing.T) {
	e := newEnv(t, publisher.Config{}, nil, publisher.WithApplications(kymaApplications()))
	tests := map[string]struct {
		app                     string
		wantStandard, wantExact string
		wantRoute               string
		wantExactType           string
	}{
		"typed Application": {
			app: "commerce-prod", wantStandard: "kyma.commerce.sales.order.created.v1", wantRoute: "commerce",
			wantExact: "kyma.kyma.sap.kyma.custom.commerce.salesorder.created.v1", wantExactType: "sap.kyma.custom.commerce.salesorder.created.v1",
		},
		"Application without a type": {
			app: "my_billing", wantStandard: "kyma.my_billing.sales.order.created.v1",
			wantExact: "kyma.kyma.sap.kyma.custom.mybilling.salesorder.created.v1", wantExactType: "sap.kyma.custom.mybilling.salesorder.created.v1",
		},
		"no Application": {
			app: "unknown-app", wantStandard: "kyma.unknown-app.sales.order.created.v1",
			wantExact: "kyma.kyma.sap.kyma.custom.unknownapp.salesorder.created.v1", wantExactType: "sap.kyma.custom.unknownapp.salesorder.created.v1",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			code, body, _ := e.post(t, "/"+tt.app+"/v1/events", jsonHeader,
				`{"event-type":"sales.order.created","event-type-version":"v1","event-time":"2026-01-02T03:04:05Z","data":{"id":7}}`)
			require.Equal(t, http.StatusOK, code, body)
			got := e.stored(t, 2)
			assert.Equal(t, tt.wantStandard, got[0].Subject)
			assert.Equal(t, []string{tt.app}, got[0].Header["ce-source"], "the subscriber sees the application")
			assert.Equal(t, []string{"sales.order.created.v1"}, got[0].Header["ce-type"])
			if tt.wantRoute != "" {
				assert.Equal(t, []string{tt.wantRoute}, got[0].Header[eventstore.HeaderRouteSource])
			} else {
				assert.NotContains(t, got[0].Header, eventstore.HeaderRouteSource)
			}
			assert.Equal(t, tt.wantExact, got[1].Subject)
			assert.Equal(t, []string{tt.wantExactType}, got[1].Header["ce-type"])
			assert.Equal(t, []string{"kyma"}, got[1].Header["ce-source"])
			assert.NotContains(t, got[1].Header, eventstore.HeaderRouteSource)
		})
	}
}

// TestPublishApplicationSource follows Kyma's publisher for CloudEvents:
// one whose source names a typed Application is routed by the type, and a
// legacy-prefixed type naming such an application is rewritten to the type.
func TestPublishApplicationSource(t *testing.T) {
	e := newEnv(t, publisher.Config{}, nil, publisher.WithApplications(kymaApplications()))
	h := binary("c1", "order.created.v1")
	h["Ce-Source"] = "commerce-prod"
	code, body, _ := e.post(t, "/publish", h, `{}`)
	require.Equal(t, http.StatusNoContent, code, body)
	got := e.stored(t, 1)[0]
	assert.Equal(t, "kyma.commerce.order.created.v1", got.Subject)
	assert.Equal(t, []string{"commerce-prod"}, got.Header["ce-source"])
	assert.Equal(t, []string{"commerce"}, got.Header[eventstore.HeaderRouteSource])

	code, body, _ = e.post(t, "/commerce-prod/v2/events", binary("c2", "sap.kyma.custom.commerce-prod.sales.order.created.v1"), `{}`)
	require.Equal(t, http.StatusNoContent, code, body)
	got = e.stored(t, 1)[0]
	assert.Equal(t, []string{"sap.kyma.custom.commerce.salesorder.created.v1"}, got.Header["ce-type"])
	assert.Equal(t, "kyma.shop.sap.kyma.custom.commerce.salesorder.created.v1", got.Subject)

	code, body, _ = e.post(t, "/publish", binary("c3", "order.created.v1"), `{}`)
	require.Equal(t, http.StatusNoContent, code, body)
	got = e.stored(t, 1)[0]
	assert.Equal(t, "kyma.shop.order.created.v1", got.Subject, "a source that is no Application is its own route")
	assert.NotContains(t, got.Header, eventstore.HeaderRouteSource)
}
