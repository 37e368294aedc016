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
	"github.com/kfn-dev/kfn/internal/logging"
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

// config is a configuration with a Load that derives a setting from the
// flags and a LogFormat, as the controller's has.
type config struct {
	Greeting, Level string
	Text            bool
	loaded          bool
}

func (c *config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Greeting, "greeting", c.Greeting, "what to say")
	fs.StringVar(&c.Level, "log-level", c.Level, "log level")
	fs.BoolVar(&c.Text, "text", c.Text, "text logs")
}

func (c *config) Load(fs *flag.FlagSet) error {
	if c.Greeting == "" {
		return errors.New("no greeting")
	}
	if c.Level == "" {
		c.Level = "debug"
	}
	c.loaded = true
	return nil
}

func (c *config) LogFormat() logging.Format {
	if c.Text {
		return logging.Text
	}
	return logging.JSON
}

func TestOfLoadsAndChoosesTheLogFormat(t *testing.T) {
	var got config
	run := func(_ context.Context, c config, log *slog.Logger) error {
		got = c
		log.Debug("ran")
		return nil
	}
	c := command.Of("demo", config{}, run)

	var stderr bytes.Buffer
	require.EqualError(t, c.Execute(context.Background(), nil, &stderr), "no greeting", "Load's error stops it")
	assert.False(t, got.loaded, "nothing ran")

	require.NoError(t, command.Of("demo", config{}, run).Execute(context.Background(), []string{"-greeting=hi", "-text"}, &stderr))
	assert.True(t, got.loaded)
	assert.Equal(t, "debug", got.Level, "the level Load chose")
	assert.Contains(t, stderr.String(), "msg=ran", "a debug line, as text")

	stderr.Reset()
	require.NoError(t, command.Of("demo", config{}, run).Execute(context.Background(), []string{"-greeting=hi", "-log-level=info"}, &stderr))
	assert.Empty(t, stderr.String(), "the level given wins over Load's choice")
}

func TestSubcommandsRunInsteadOfTheComponent(t *testing.T) {
	ran := "never"
	c := component(&ran, nil)
	var subArgs []string
	c.Subcommands = map[string]func(context.Context, []string) error{
		"fetch": func(_ context.Context, args []string) error { subArgs = args; return nil },
		"help":  func(context.Context, []string) error { return flag.ErrHelp },
	}
	require.NoError(t, c.Execute(context.Background(), []string{"fetch", "-x=1", "y"}, &bytes.Buffer{}))
	assert.Equal(t, []string{"-x=1", "y"}, subArgs)
	assert.Equal(t, "never", ran, "the component did not run")
	require.NoError(t, c.Execute(context.Background(), []string{"help"}, &bytes.Buffer{}), "-h of a subcommand is no failure")
	require.NoError(t, c.Execute(context.Background(), []string{"-greeting=hi"}, &bytes.Buffer{}))
	assert.Equal(t, "hi", ran)
}
