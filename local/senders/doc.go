// Package senders gives each namespace whose Functions kfn dev runs a
// token of its own, which the Functions' hosts send with every event they
// emit (runtimes.EnvIdentityTokenFile), and tells kfn dev's publisher
// which namespace a token is (it implements publisher.Senders): so that,
// as in a cluster, an emitted event carries its namespace and is held to
// that namespace's bounds (its publish rate and bytes, its turns, its
// replies' rate), not to the one bucket that anonymous publishes share,
// and that a Function cannot pass its events off as another namespace's.
// The user's own publishes (curl, kfn publish) carry no token and stay
// anonymous, as Kyma's.
package senders
