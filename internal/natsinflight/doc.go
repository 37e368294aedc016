// Package natsinflight carries the gateway's in-flight reports (package
// contract/inflight) over core NATS: the gateway reports through a
// [Publisher] (a gateway.InFlightReporter) on one subject (default
// inflight.DefaultSubject), and each scaler replica [Subscribe]s to it (not
// in a queue group: every replica needs every count to answer KEDA and to
// push activation). A report that does not decode is dropped with a log.
package natsinflight
