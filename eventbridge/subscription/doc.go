// Package subscription keeps JetStream and the dispatcher in step with the
// Subscription resources: the Reconciler (one leader at a time) validates
// each Subscription as Kyma does, creates, updates or deletes its durable
// pull consumer and writes Kyma's status; the Feeder (in every event-bridge
// replica) tells the local dispatcher which Subscriptions to serve.
package subscription
