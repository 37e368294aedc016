// Command controller runs kfn's Function controller: it reconciles
// serverless.kyma-project.io/v1alpha2 Functions into ConfigMaps,
// Deployments, Services and autoscalers. See controller/README.md for the
// flags and the config file.
//
// "controller fetch-source ..." is the init container command that fetches
// a Git Function's source into its pod.
package main

import (
	"context"

	"github.com/kfn-dev/kfn/controller"
	"github.com/kfn-dev/kfn/internal/command"
)

// component is the controller with its default configuration, which its
// config file and flags change, and the fetch-source init container.
func component() command.Component {
	c := command.Of("controller", controller.DefaultProcess(), controller.Run)
	c.Subcommands = map[string]func(ctx context.Context, args []string) error{"fetch-source": fetchSource}
	return c
}

func main() { command.Main(component()) }
