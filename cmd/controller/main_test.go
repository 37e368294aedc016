package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/kfn-dev/kfn/internal/logging"
)

func TestOptionsFileThenFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(file, []byte("workers: 3\ngitPollInterval: 2m\nscalerAddress: file:9090\nruntimeImages:\n  nodejs22: file/node:1\n"), 0o644))
	o, err := parseOptions([]string{"--config", file, "--scaler-address", "flag:9090", "--runtime-image", "python312=flag/py:2", "--leader-elect=false"})
	require.NoError(t, err)
	assert.Equal(t, 3, o.Workers)
	assert.Equal(t, 2*time.Minute, o.GitPollInterval.Duration)
	assert.Equal(t, "flag:9090", o.ScalerAddress, "flags win over the file")
	assert.Equal(t, "file/node:1", o.RuntimeImages["nodejs22"])
	assert.Equal(t, "flag/py:2", o.RuntimeImages["python312"])
	assert.False(t, o.LeaderElect)
	require.NoError(t, o.functionConfig().Validate())

	require.NoError(t, os.WriteFile(file, []byte("wrokers: 3\n"), 0o644))
	_, err = parseOptions([]string{"--config", file})
	require.Error(t, err, "unknown keys are refused")
}

func TestScalerAuthentication(t *testing.T) {
	o, err := parseOptions(nil)
	require.NoError(t, err)
	assert.Nil(t, o.functionConfig().Resources.ScalerAuthentication, "plain gRPC by default")

	file := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(file, []byte("scalerAuthentication: ClusterTriggerAuthentication/kfn-scaler\n"), 0o644))
	o, err = parseOptions([]string{"--config", file})
	require.NoError(t, err)
	c := o.functionConfig()
	require.NoError(t, c.Validate())
	assert.Equal(t, "ClusterTriggerAuthentication", c.Resources.ScalerAuthentication.Kind)
	assert.Equal(t, "kfn-scaler", c.Resources.ScalerAuthentication.Name)

	for _, bad := range []string{"kfn-scaler", "Secret/kfn-scaler", "TriggerAuthentication/", "TriggerAuthentication/Bad_Name"} {
		o, err := parseOptions([]string{"--scaler-authentication", bad})
		require.NoError(t, err)
		require.ErrorContains(t, o.functionConfig().Validate(), "scaler authentication", bad)
	}
}

func TestFetchSourceCommand(t *testing.T) {
	// A local repository (go-git's in-process file transport); the HTTP
	// and authentication paths are covered by controller/gitsource.
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, false)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "fns", "a"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "fns", "a", "handler.js"), []byte("hi"), 0o644))
	wt, err := repo.Worktree()
	require.NoError(t, err)
	_, err = wt.Add("fns/a/handler.js")
	require.NoError(t, err)
	h, err := wt.Commit("c", &git.CommitOptions{Author: &object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(1700000000, 0)}})
	require.NoError(t, err)
	auth := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(auth, "username"), []byte("u"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(auth, "password"), []byte("p"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(auth, ".hidden"), []byte("x"), 0o600))
	data, err := readSecretDir(auth)
	require.NoError(t, err)
	assert.Equal(t, map[string][]byte{"username": []byte("u"), "password": []byte("p")}, data)

	dest := filepath.Join(t.TempDir(), "function")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, dispatch(ctx, []string{"fetch-source", "--url=" + dir, "--reference=master", "--commit=" + h.String(),
		"--base-dir=fns/a", "--dest=" + dest}))
	b, err := os.ReadFile(filepath.Join(dest, "handler.js"))
	require.NoError(t, err)
	assert.Equal(t, "hi", string(b))
}

// TestLoggerLayout checks the controller's logs as run sets them up: kfn's
// layout (package logging) with component "controller", controller-runtime's
// logr lines bridged into it, the level from --log-level or the config
// file, and --log-development as the text form at debug.
func TestLoggerLayout(t *testing.T) {
	file := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(file, []byte("logLevel: warn\n"), 0o644))
	tests := map[string]struct {
		args      []string
		wantLines int // of the three lines logged: info, V(1), error
		text      bool
	}{
		"default info":       {args: nil, wantLines: 2},
		"debug":              {args: []string{"--log-level=debug"}, wantLines: 3},
		"file warn":          {args: []string{"--config", file}, wantLines: 1},
		"flag over file":     {args: []string{"--config", file, "--log-level=info"}, wantLines: 2},
		"development":        {args: []string{"--log-development"}, wantLines: 3, text: true},
		"development, error": {args: []string{"--log-development", "--log-level=error"}, wantLines: 1, text: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			o, err := parseOptions(tt.args)
			require.NoError(t, err)
			var buf bytes.Buffer
			slogger, err := o.newLogger(&buf)
			require.NoError(t, err)
			log := logging.Logr(slogger).WithName("setup")
			log.Info("starting", "workers", 8)
			log.V(1).Info("detail")
			log.Error(errors.New("no cache"), "failed")
			out := strings.Split(strings.TrimSpace(buf.String()), "\n")
			require.Len(t, out, tt.wantLines, buf.String())
			last := out[len(out)-1]
			if tt.text {
				assert.Contains(t, last, `level=ERROR msg=failed component=controller logger=setup error="no cache"`)
				return
			}
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(last), &m), last)
			for _, k := range []string{"time", "level", "msg", "component", "logger", "error"} {
				assert.Contains(t, m, k)
			}
			assert.Equal(t, "controller", m["component"])
			assert.Equal(t, "ERROR", m["level"])
			assert.Equal(t, "no cache", m["error"])
		})
	}
	_, err := parseOptions([]string{"--log-level=verbose"})
	require.ErrorIs(t, err, logging.ErrInvalidLevel)
	require.NoError(t, os.WriteFile(file, []byte("logLevel: loud\n"), 0o644))
	_, err = parseOptions([]string{"--config", file})
	require.ErrorIs(t, err, logging.ErrInvalidLevel)
}
