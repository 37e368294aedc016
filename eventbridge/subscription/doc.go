// Package subscription keeps JetStream in step with the Subscription
// resources: the Reconciler (one leader at a time) validates each
// Subscription as Kyma does, creates, updates or deletes its durable pull
// consumer and writes Kyma's status; a Set does the same for Subscriptions
// read from files (kfn dev, -subscriptions) and tells its feed.Targets. In a
// cluster, feed.Feeder tells each replica's dispatcher what to serve. An
// Opener, beside whichever makes the consumers, opens an event stream that
// NATS lost and that was made anew (closed) only once every Subscription's
// consumer exists in it, so that no event is acknowledged that no consumer
// keeps.
package subscription
