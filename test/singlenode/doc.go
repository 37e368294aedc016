// Package singlenode starts and stops a single-node Kubernetes cluster on
// this machine, built from source and without Docker: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kubelet and kube-proxy (built from
// their Go modules by hack/cluster/assets.sh), Debian's containerd and runc,
// and the CNI bridge plugin.
//
// The pods live in network namespaces on a bridge that [Up] creates. They
// get routes to the pod range, the Service range and the node only, and an
// iptables guard in the raw table drops anything else from the bridge and
// anything from another interface to the pods: nothing leaves the machine.
//
// Every process runs detached, so the cluster outlives `hack/cluster up`;
// [Down] finds them again by their recorded ids and removes every trace
// (containers, mounts, network namespaces, cgroups, the bridge, iptables
// rules), also after a crash. [Up] calls Down first, so a second run on the
// same machine works.
package singlenode
