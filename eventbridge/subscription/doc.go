// Package subscription keeps JetStream in step with the Subscription
// resources: the Reconciler (one leader at a time) validates each
// Subscription as Kyma does, creates, updates or deletes its durable pull
// consumer and writes Kyma's status; a Set does the same for Subscriptions
// read from files (kfn dev, -subscriptions) and tells its feed.Targets. In a
// cluster, feed.Feeder tells each replica's dispatcher what to serve.
package subscription
