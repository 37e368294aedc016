package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
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
	assert.Nil(t, o.functionConfig().ScalerAuthentication, "plain gRPC by default")

	file := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(file, []byte("scalerAuthentication: ClusterTriggerAuthentication/kfn-scaler\n"), 0o644))
	o, err = parseOptions([]string{"--config", file})
	require.NoError(t, err)
	c := o.functionConfig()
	require.NoError(t, c.Validate())
	assert.Equal(t, "ClusterTriggerAuthentication", c.ScalerAuthentication.Kind)
	assert.Equal(t, "kfn-scaler", c.ScalerAuthentication.Name)

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
