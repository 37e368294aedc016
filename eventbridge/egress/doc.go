// Package egress decides where the event bridge may send a delivery: never
// to a loopback (except in kfn dev, whose functions listen there),
// link-local (the cloud metadata address), unspecified, "this network",
// broadcast or multicast address, nor to one a Policy denies (the API
// server's), and, when a Policy names networks, only into those. It checks
// the address a connection is dialled to, after name resolution, so that
// neither a DNS name nor a redirect leads around it.
package egress
