// Command scaler runs kfn's KEDA external scaler: it reads the backlog of
// every Subscription's JetStream consumer, learns which Function each one
// feeds from the Subscriptions in the cluster, receives the gateway's
// in-flight counts over NATS, and answers KEDA over gRPC (externalscaler
// protocol, trigger types external and external-push), with the gRPC health
// service and Prometheus metrics. See scaler/README.md for the flags.
package main

import (
	"github.com/kfn-dev/kfn/internal/command"
	"github.com/kfn-dev/kfn/scaler"
)

// component is the scaler with its default configuration, which its
// flags change.
func component() command.Component { return command.Of("scaler", scaler.DefaultProcess(), scaler.Run) }

func main() { command.Main(component()) }
