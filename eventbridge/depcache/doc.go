// Package depcache is the dependency cache's server: the installed
// dependencies of Functions (a gzip-compressed tar of a pod's dependency
// directory), kept in a JetStream object store by namespace, runtime and
// dependency hash, so that a pod whose Function has dependencies unpacks
// them instead of running npm or pip.
//
// Routes, under PathPrefix on the publisher's listener:
//
//	PUT  /_kfn/dependencies/{runtime}/{hash}  201 stored, 200 already there (the first write stays until removed)
//	GET  /_kfn/dependencies/{runtime}/{hash}  200 with the object, 404 when there is none
//	HEAD /_kfn/dependencies/{runtime}/{hash}  as GET, without the body
//
// {runtime} is a runtime name of the Function API (nodejs22, python312,
// ...), {hash} the plan's dependency hash (64 lowercase hex digits);
// anything else is 400. The caller sends its pod's identity token
// (Authorization: Bearer); the namespace is that of the token's
// ServiceAccount (Senders), never taken from the request, and the object
// is read and stored under <namespace>/<runtime>/<hash> only: a namespace
// never reads nor overwrites another's. A request without a token, with
// one the cluster does not know, or a user's, is 401 and changes nothing;
// past the rate of new tokens' reviews, 429.
//
// Only the install step of a Function's pod stores: a PUT carries, beside
// the identity, the writer token of the install init container
// (WriterHeader), which the cluster must confirm (Writers:
// a TokenReview) was made for that very object's audience
// (WriterAudience(runtime, hash)), is bound to a pod and
// is of the identity's namespace; else 403 and nothing stored. The
// controller asks for that token only for the install container of a
// Function whose dependency set has that hash, never for the function
// container, so neither a Function's code at run time nor any other token
// of the namespace (an API token, another pod's identity or writer token)
// stores an object, and what a pod stores is bound to the dependency set it
// installs. A namespace's writer tokens are reviewed at most 2 a second
// (bursts of 20), past which 429. Bounds, each of Config: one object's
// size (413, counted while the body streams into the store, never
// buffered whole), a namespace's stored bytes and objects (507), the
// bucket's size (stream.Config.DependencyMaxBytes: when it is full, an
// upload first removes the least read objects of the namespaces that store
// more than a fair share of it, else 507), uploads at once per server and
// per namespace (429), and an upload's duration (408: a slow body is cut). A
// refused or failed upload stores nothing. Downloads (GET) are bounded
// likewise, as each holds a JetStream consumer whose chunks NATS sends
// ahead of a slow client: at once per server and per namespace (429), each
// write to the client (a client that takes nothing for
// Config.DownloadWriteTimeout has its download ended, its consumer and
// slot released), and a download's duration. A namespace's usage comes from
// each server's index of the bucket, kept by a watch of its objects'
// descriptions (Cache.Run), never from a listing of the bucket. An object
// no pod read for Config.MaxIdle is removed, and every object expires
// stream.Config.DependencyMaxAge after it was stored, so that the sets a
// namespace no longer uses leave its quota and a bad first write does not
// stay.
package depcache
