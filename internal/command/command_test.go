package command_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/internal/command"
)

// component returns a Component with a -greeting flag and the run it
// records into.
func component(ran *string, runErr error) command.Component {
	greeting, level := "hello", "info"
	return command.Component{
		Name: "demo",
		RegisterFlags: func(fs *flag.FlagSet) {
			fs.StringVar(&greeting, "greeting", greeting, "what to say")
			fs.StringVar(&level, "log-level", level, "log level")
		},
		Run: func(ctx context.Context, log *slog.Logger) error {
			if log == nil {
				return errors.New("no logger")
			}
			*ran = greeting
			return runErr
		},
	}
}

func TestExecuteRunsWithTheParsedFlags(t *testing.T) {
	var ran string
	require.NoError(t, component(&ran, nil).Execute(context.Background(), []string{"-greeting=hi"}, &bytes.Buffer{}))
	assert.Equal(t, "hi", ran)

	boom := errors.New("boom")
	assert.ErrorIs(t, component(&ran, boom).Execute(context.Background(), nil, &bytes.Buffer{}), boom, "the component's failure is returned")
}

func TestExecuteRefusesBadFlagsBeforeRunning(t *testing.T) {
	tests := map[string]struct {
		args    []string
		wantErr string
	}{
		"unknown flag":  {args: []string{"-nope"}, wantErr: "flag provided but not defined: -nope"},
		"bad log level": {args: []string{"-log-level=loud"}, wantErr: "-log-level"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			ran := "never"
			var stderr bytes.Buffer
			err := component(&ran, nil).Execute(context.Background(), tt.args, &stderr)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.Equal(t, "never", ran, "nothing ran")
		})
	}
}

func TestHelpIsNoFailure(t *testing.T) {
	ran := "never"
	var stderr bytes.Buffer
	require.NoError(t, component(&ran, nil).Execute(context.Background(), []string{"-h"}, &stderr))
	assert.Contains(t, stderr.String(), "Usage of demo", "the usage goes to stderr")
	assert.Contains(t, stderr.String(), "-greeting")
	assert.Equal(t, "never", ran)
}
