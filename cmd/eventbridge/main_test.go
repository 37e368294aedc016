package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/eventbridge/bridge"
)

func TestRunRefusesBadFlagsBeforeDoingAnything(t *testing.T) {
	tests := map[string]struct {
		args    []string
		wantErr string
	}{
		"unknown flag":        {args: []string{"-nope"}, wantErr: "flag provided but not defined"},
		"unknown component":   {args: []string{"-components=publisher,scaler"}, wantErr: `unknown component "scaler"`},
		"gateway without k8s": {args: []string{"-components=gateway", "-subscriptions=subs.yaml"}, wantErr: "the gateway needs Kubernetes"},
		"bad storage":         {args: []string{"-storage=tape"}, wantErr: `storage must be "file" or "memory"`},
		"bad resolve":         {args: []string{"-resolve=fn"}, wantErr: "want <service>.<namespace>=<base URL>"},
		"short ack wait":      {args: []string{"-ack-wait=10ms"}, wantErr: "-ack-wait must be at least 1s"},
		"bad log level":       {args: []string{"-log-level=loud"}, wantErr: "log-level"},
		"no delivery":         {args: []string{"-default-max-deliver=0"}, wantErr: "maxDeliver must be at least 1"},
		"backoff max < init":  {args: []string{"-default-backoff-initial=10s", "-default-backoff-max=1s"}, wantErr: "backoffMax (1s) must not be less than backoffInitial (10s)"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			err := run(context.Background(), tt.args)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
	require.NoError(t, run(context.Background(), []string{"-h"}), "help is no failure")
}

func TestDefaultConfigIsValid(t *testing.T) {
	cfg := bridge.DefaultConfig()
	require.NoError(t, cfg.Validate())
}
