// Command coredns is CoreDNS with only the plugins the single-node
// cluster's Corefile uses (test/node/singlenode/addons.yaml): building it
// compiles none of the cloud providers' SDKs that CoreDNS's own main
// links for its other plugins, which made it one of the slowest binaries
// of test/node/assets.sh. CoreDNS runs its plugins in the order of its
// own directive list (core/dnsserver), whatever the order of the imports.
package main

import (
	"github.com/coredns/coredns/coremain"
	// The Corefile's plugins; a plugin it names that is not imported
	// here stops CoreDNS at start with "unknown directive".
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() {
	coremain.Run()
}
