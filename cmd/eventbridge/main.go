// Command eventbridge runs kfn's event bridge: the CloudEvents publisher,
// the dispatcher that delivers events to Subscription sinks, the
// Subscription reconciler and the dead-letter admin API. See
// eventbridge/README.md for the flags.
package main

import (
	"github.com/kfn-dev/kfn/eventbridge"
	"github.com/kfn-dev/kfn/internal/command"
)

// component is the event bridge with its default configuration, which its
// flags change.
func component() command.Component {
	return command.Of("eventbridge", eventbridge.DefaultProcess(), eventbridge.Run)
}

func main() { command.Main(component()) }
