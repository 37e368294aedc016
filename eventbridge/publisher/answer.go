package publisher

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/kfn-dev/kfn/eventbridge/admission"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/internal/auth"
	"github.com/kfn-dev/kfn/internal/logging"
)

// StatusCode maps an error of the publishing path to its HTTP status.
func StatusCode(err error) int {
	switch {
	case errors.Is(err, errTooLarge), errors.Is(err, eventstore.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, eventstore.ErrInvalidEvent):
		return http.StatusBadRequest
	case errors.Is(err, auth.ErrUnauthenticated):
		return http.StatusUnauthorized
	case errors.Is(err, auth.ErrTooManyReviews), errors.Is(err, ErrTooManyEvents), errors.Is(err, ErrOverShare):
		return http.StatusTooManyRequests
	case errors.Is(err, admission.ErrReserved):
		return http.StatusForbidden
	case errors.Is(err, eventstore.ErrStorageFull):
		return http.StatusInsufficientStorage
	case errors.Is(err, eventstore.ErrUnavailable), errors.Is(err, ErrBusy):
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// fail answers a CloudEvents request with the status of err and its text.
func (p *Publisher) fail(w http.ResponseWriter, r *http.Request, err error) int {
	code := StatusCode(err)
	p.logFailure(r, code, err)
	if code == http.StatusServiceUnavailable || code == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	if !writeKymaText(w, code, err) {
		http.Error(w, err.Error(), code)
	}
	return code
}

func (p *Publisher) logFailure(r *http.Request, code int, err error) {
	level := slog.LevelDebug // the client is told; a bad request is its problem
	if code >= 500 {
		level = slog.LevelWarn
	}
	ctx := r.Context()
	if !p.log.Enabled(ctx, level) {
		return
	}
	ok, dropped := p.failLines.Take("")
	if !ok {
		return
	}
	args := []any{"path", r.URL.Path, "code", code, "error", err}
	if dropped > 0 {
		args = append(args, logging.DroppedKey, dropped)
	}
	p.log.Log(ctx, level, "publish failed", args...)
}

// FailureLinesPerSecond bounds the lines the publisher logs about the
// requests it fails, in bursts of ten times as many: a full stream or a
// NATS away fails every request, thousands a second, each told to its
// client and counted in the metrics. Past it the lines are dropped, and
// the next says how many were (droppedLines).
const FailureLinesPerSecond = 10
