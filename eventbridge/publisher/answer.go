package publisher

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/kfn-dev/kfn/eventbridge/admission"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/internal/auth"
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
	case errors.Is(err, eventstore.ErrUnavailable):
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
	http.Error(w, err.Error(), code)
	return code
}

func (p *Publisher) logFailure(r *http.Request, code int, err error) {
	level := slog.LevelDebug // the client is told; a bad request is its problem
	if code >= 500 {
		level = slog.LevelWarn
	}
	p.log.Log(r.Context(), level, "publish failed", "path", r.URL.Path, "code", code, "error", err)
}
