// Package fairqueue is the work queue of kfn's controllers: the requests
// of each namespace wait in a queue of their own, and the workers take
// the namespaces in turn, so that one namespace's thousands of objects
// (a tenant applying 5,000 Functions at once, within the quota it was
// given) do not make another namespace's new object wait behind all of
// them: it waits behind at most one request of each namespace with
// requests waiting. Everything else is client-go's workqueue (its
// de-duplication, processing and dirty sets, delays, rate limits and
// metrics), of which this package provides the underlying queue
// (workqueue.Queue) and a Workqueue for controller-runtime's
// controller.Options.
package fairqueue
