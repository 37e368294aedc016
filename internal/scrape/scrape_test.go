package scrape_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/internal/scrape"
)

// twice reports the same series two times, as a collector that lists a
// server's objects does when the server lists one twice.
type twice struct{ desc *prometheus.Desc }

func (c twice) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c twice) Collect(ch chan<- prometheus.Metric) {
	for range 2 {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1, "a")
	}
}

func TestAFaultyCollectorCostsOnlyItsOwnSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	good := prometheus.NewCounter(prometheus.CounterOpts{Name: "good_total", Help: "A counter."})
	good.Add(3)
	reg.MustRegister(good, twice{prometheus.NewDesc("doubled", "Reported twice.", []string{"l"}, nil)})
	var logged bytes.Buffer
	h := scrape.Handler(reg, slog.New(slog.NewTextHandler(&logged, nil)))

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body, err := io.ReadAll(rec.Body)
	require.NoError(t, err)

	assert.Equal(t, http.StatusOK, rec.Code, "%s", body)
	assert.Contains(t, string(body), "good_total 3")
	assert.Contains(t, logged.String(), "doubled", "the series left out is logged")
	assert.Contains(t, logged.String(), "level=WARN")
}
