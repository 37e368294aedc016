// Package metrictest reads, in tests, the value of a metric a Prometheus
// registry gathers, as a scrape would see it.
package metrictest
