// Command node brings the real node up, a single-node Kubernetes cluster on
// this machine with KEDA and kfn installed, or tears it down (make cluster,
// make cluster-down):
//
//	go run ./test/node up -bin DIR -images DIR [-nodes N]
//	go run ./test/node down -bin DIR
//
// DIR are what test/node/assets.sh and test/node/images.sh print. It
// must run as root.
//
// Its folder holds the rest of the real node (its README.md maps it):
// the scripts that build the node's binaries and images, the cluster
// itself (singlenode), installing KEDA and kfn on it (install), and the
// programs built for it (pause, tools), which e2e/cluster's scenarios and
// bench/cluster use too.
package main
