// Command pause is the sandbox process of the single-node cluster's pods
// (what Kubernetes' pause image does): it holds the pod's namespaces open,
// doing nothing until it is told to stop.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	// As PID 1 of a shared process namespace it also reaps orphans.
	signal.Ignore(syscall.SIGCHLD)
	<-stop
}
