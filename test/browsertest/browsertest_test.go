package browsertest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/chromedp/cdproto"
	"github.com/stretchr/testify/assert"
)

// TestContextGone: only Chromium's answers about a JavaScript context
// that no longer exists have a poll begun again.
func TestContextGone(t *testing.T) {
	for err, want := range map[error]bool{
		&cdproto.Error{Code: -32000, Message: "Cannot find context with specified id"}:                   true,
		fmt.Errorf("run: %w", &cdproto.Error{Code: -32000, Message: "Execution context was destroyed."}): true,
		&cdproto.Error{Code: -32000, Message: "Object reference chain is too long"}:                      false,
		&cdproto.Error{Code: -32601, Message: "Cannot find context with specified id"}:                   false,
		errors.New("Cannot find context with specified id (-32000)"):                                     false,
		context.DeadlineExceeded: false,
	} {
		assert.Equal(t, want, contextGone(err), "%v", err)
	}
}
