package main

import (
	"bytes"
	"context"
	"fmt"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// childResources are what the controller writes for a Function.
var childResources = map[string]bool{
	"configmaps": true, "deployments": true, "services": true,
	"horizontalpodautoscalers": true, "scaledobjects": true,
}

// writeVerbs are the API server's verbs that change an object.
var writeVerbs = map[string]bool{"APPLY": true, "PATCH": true, "PUT": true, "POST": true, "DELETE": true}

// apiWrites reads the API server's apiserver_request_total and returns the
// writes of the controller's kinds: children of every verb that changes an
// object, and Function status. The benchmark's own writes (the namespace
// and the Functions themselves) are not among them.
func apiWrites(ctx context.Context, cfg *rest.Config) (int, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the API server's metrics: %w", err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return 0, fmt.Errorf("parse the API server's metrics: %w", err)
	}
	fam, ok := families["apiserver_request_total"]
	if !ok {
		return 0, fmt.Errorf("the API server's metrics have no apiserver_request_total")
	}
	total := 0
	for _, m := range fam.GetMetric() {
		l := map[string]string{}
		for _, lp := range m.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		if !writeVerbs[l["verb"]] {
			continue
		}
		if childResources[l["resource"]] || (l["resource"] == "functions" && l["subresource"] == "status") {
			total += int(m.GetCounter().GetValue())
		}
	}
	return total, nil
}
