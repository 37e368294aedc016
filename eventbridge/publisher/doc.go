// Package publisher is the HTTP front of the event bridge: it accepts
// CloudEvents (binary, structured and batch mode on /publish and
// /{app}/v2/events, Kyma's legacy JSON on /{app}/v1/events), validates them,
// and answers only once JetStream has stored them, with a status code that
// says what happened: 204 (200 for legacy) stored, 400 invalid with the
// reason, 401/403 an unknown sender or a reserved source, 413 too large,
// 429 over the sender's rate or its share of the publisher's work
// (Retry-After), 503 broker unavailable, 507 storage full.
package publisher
