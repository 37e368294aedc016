// Package singlenode starts and stops a single-node Kubernetes cluster on
// this machine, built from source and without Docker: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kubelet, kube-proxy and the
// NetworkPolicy enforcer kube-network-policies (built from their Go modules
// by hack/cluster/assets.sh), Debian's containerd and runc, and the CNI
// bridge plugin. NetworkPolicies are enforced: the bridge plugin implements
// none, so kube-network-policies judges the pods' new connections, which
// an iptables chain hands it through an NFQUEUE.
//
// The pods live in network namespaces on a bridge that [Up] creates. They
// get routes to the pod range, the Service range and the node only, and an
// iptables guard in the raw table drops anything else from the bridge and
// anything from another interface to the pods: nothing leaves the machine.
//
// Every process runs detached, so the cluster outlives `hack/cluster up`;
// [Down] finds them again by their recorded ids and removes every trace
// (containers, mounts, network namespaces, cgroups, the bridge, iptables
// rules, the enforcer's nftables table), also after a crash. [Up] calls Down first, so a second run on the
// same machine works.
package singlenode
