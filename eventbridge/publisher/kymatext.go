package publisher

import (
	"io"
	"net/http"
)

// kymaText is an error whose answer's body is exactly text, as Kyma's
// publisher writes it: sdk-go's own message for an event it cannot read
// or that is not valid (no prefix, no newline added), and Kyma's messages
// for a type with an empty segment or a legacy type it cannot parse. A
// client that matches Kyma's answer reads the same bytes. The error's own
// text (Error) stays kfn's wrapped one, for the logs.
type kymaText struct {
	err  error
	text string
}

func (k kymaText) Error() string { return k.err.Error() }
func (k kymaText) Unwrap() error { return k.err }

// withKymaText makes err answer text as its body.
func withKymaText(err error, text string) error { return kymaText{err: err, text: text} }

// writeKymaText answers err with code and its text, when err is a
// kymaText itself, and reports whether it did: text/plain, as Go's server
// types Kyma's answer. Only err itself counts, not what it wraps: an event
// of a batch (which Kyma refuses whole) is answered with kfn's text, which
// says which event it was.
func writeKymaText(w http.ResponseWriter, code int, err error) bool {
	k, ok := err.(kymaText) //nolint:errorlint // err itself, not what it wraps (see above)
	if !ok {
		return false
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, k.text)
	return true
}
