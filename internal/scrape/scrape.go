package scrape

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves reg's series in the Prometheus exposition formats. A
// gather error (a collector's error, a series reported twice) leaves the
// series concerned out, answers 200 with the rest, counts the scrape in
// promhttp_metric_handler_errors_total{cause="gathering"} and is logged on
// log at warning level.
func Handler(reg *prometheus.Registry, log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		Registry:      reg,
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      errorLog{log},
	})
}

// errorLog is promhttp's Logger on slog.
type errorLog struct{ log *slog.Logger }

// Println implements promhttp.Logger.
func (l errorLog) Println(v ...any) {
	l.log.Warn("serving metrics", "error", fmt.Sprint(v...))
}
