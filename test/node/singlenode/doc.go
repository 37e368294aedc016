// Package singlenode starts and stops a single-node Kubernetes cluster on
// this machine, built from source and without Docker: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kubelet, kube-proxy and the
// NetworkPolicy enforcer kube-network-policies (built from their Go modules
// by test/node/assets.sh), Debian's containerd and runc, and the CNI
// bridge plugin. NetworkPolicies are enforced: the bridge plugin implements
// none, so kube-network-policies judges the pods' new connections, which
// an iptables chain hands it through an NFQUEUE.
//
// The pods live in network namespaces on a bridge that [Up] creates. They
// get routes to the pod range, the Service range and the node only, and an
// iptables guard in the raw table drops anything else from the bridge and
// anything from another interface to the pods: nothing leaves the machine.
//
// Every process runs detached, so the cluster outlives `go run ./test/node up`;
// [Down] finds them again by their recorded ids and removes every trace
// (containers, mounts, network namespaces, cgroups, the bridge, iptables
// rules, the enforcer's nftables table), also after a crash. [Up] calls Down first, so a second run on the
// same machine works.
//
// [Cluster.AddNode] adds more nodes to a running cluster, off by default:
// each has its own kubelet, kube-proxy, NetworkPolicy enforcer and
// containerd (its own root, run-time state and image store), its own pod
// range and cgroup root, in its own network namespace joined to the
// machine by a veth pair (the guard chain lets it reach the cluster's pods
// and the API server only). They share the machine's file system and the
// first node's control plane. [Node.Kill] stops every process of one at
// once, as the loss of its machine would; Down removes them with the rest.
package singlenode
