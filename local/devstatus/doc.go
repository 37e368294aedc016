// Package devstatus is the state of kfn's functions and Subscriptions as
// `kfn get` and kfn dev's web view show it: replicas, backlog and problems
// of each function, readiness, backlog and delivery counts of each
// Subscription. kfn dev fills it from its components, the kfn command from
// a cluster.
package devstatus
