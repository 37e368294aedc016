// Package egress decides where kfn's servers may connect on a tenant's
// behalf (the event bridge to a Subscription's sink, the controller to a
// Function's Git repository): never to a loopback (except in kfn dev,
// whose functions listen there, and tests), link-local (the cloud
// metadata address), unspecified, "this network", broadcast or multicast
// address, nor to one a Policy denies (the API server's), and, when a
// Policy names networks, only into those. It checks the address a
// connection is dialled to, after name resolution, so that neither a DNS
// name nor a redirect leads around it.
package egress
