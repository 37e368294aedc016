package main

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/eventbridge"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
)

// -hostile -apart: each attacker on a kfn pipeline of its own, a NATS
// server process and an event bridge process of its own beside the
// victim's, so that the victim and the attacker share nothing but the
// machine (its cores, its kernel, its disk). What an attack costs the
// victim so is what the machine costs it, which no share in kfn can take
// away; what it costs on the shared pipeline past that is kfn's. The
// attacker publishes without a token there (the apart bridge reviews
// none): its loads are the same rates, and no other namespace is there
// to hold them to a share; so "refused publishes" are not all refused as
// they are on the shared pipeline, and are not checked.

// apartSpec says what an apart bridge process serves: the attack class's
// Subscriptions, on the NATS server at NATS, delivering to the attacker's
// sinks.
type apartSpec struct {
	Class string            `json:"class"`
	NATS  string            `json:"nats"`
	Sinks map[string]string `json:"sinks"` // service -> URL
}

// childApart is an apart bridge process (spec, JSON): it says "url <the
// publisher's base URL>" and serves until its stdin closes.
func childApart(spec string) error {
	var s apartSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		return fmt.Errorf("apart bridge %q: %w", spec, err)
	}
	i := slices.IndexFunc(attackClasses, func(c attackClass) bool { return c.name == s.Class })
	if i < 0 {
		return fmt.Errorf("apart bridge: no attack class %q", s.Class)
	}
	a := newAttacker("")
	attackClasses[i].arm(a)
	resolve := dispatcher.ResolverFunc(func(sink v1alpha2.Sink) (string, error) {
		if u, ok := s.Sinks[sink.Service]; ok {
			return u, nil
		}
		return "", fmt.Errorf("no sink %s", sink.Service)
	})
	rb, err := startBridge(s.NATS, []string{eventbridge.ComponentPublisher, eventbridge.ComponentDispatcher}, resolve, a.subs, nil, streamShape{})
	if err != nil {
		return err
	}
	srv, url, err := serve(rb.Handlers().Publisher)
	if err != nil {
		rb.stop()
		return err
	}
	serveUntilStdinCloses(url)
	_ = srv.Close()
	rb.stop()
	return nil
}

// startApart starts the NATS process and the bridge process of an apart
// attacker of class c whose sinks are sinks, and returns the publisher's
// base URL and the stop that ends both.
func startApart(c *attackClass, sinks map[string]string) (base string, stop func(), err error) {
	natsURL, stopNATS, err := startNATSProcess()
	if err != nil {
		return "", nil, err
	}
	spec, err := json.Marshal(apartSpec{Class: c.name, NATS: natsURL, Sinks: sinks})
	if err != nil {
		stopNATS()
		return "", nil, err
	}
	base, _, stopBridge, err := startServerProcess("-child-apart", string(spec))
	if err != nil {
		stopNATS()
		return "", nil, err
	}
	return base, func() { stopBridge(); stopNATS() }, nil
}
