package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/controller/function"
	"github.com/kfn-dev/kfn/internal/egress"
	"github.com/kfn-dev/kfn/internal/logging"
)

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
	args := []string{"fetch-source", "--url=" + dir, "--reference=master", "--commit=" + h.String(), "--base-dir=fns/a", "--dest=" + dest}
	err = component().Execute(ctx, args, io.Discard)
	require.ErrorIs(t, err, egress.ErrRefused, "a path on this machine, by default")
	assert.NoFileExists(t, filepath.Join(dest, "handler.js"))
	require.NoError(t, component().Execute(ctx, append(args, "--allow-loopback"), io.Discard))
	b, err := os.ReadFile(filepath.Join(dest, "handler.js"))
	require.NoError(t, err)
	assert.Equal(t, "hi", string(b))
}

// TestRunArguments checks what the binary makes of its arguments before it
// reaches the cluster: help is no failure, and bad flags or settings fail
// with an error that says why.
func TestRunArguments(t *testing.T) {
	tests := map[string]struct {
		args    []string
		wantIs  error
		wantMsg string
	}{
		"help":              {args: []string{"-h"}},
		"fetch-source help": {args: []string{"fetch-source", "-h"}},
		"unknown flag":      {args: []string{"--no-such-flag"}, wantMsg: "flag provided but not defined: -no-such-flag"},
		"invalid setting":   {args: []string{"--workers=0"}, wantIs: function.ErrInvalidConfig},
		"bad log level":     {args: []string{"--log-level=loud"}, wantIs: logging.ErrInvalidLevel},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := component().Execute(context.Background(), tc.args, io.Discard)
			switch {
			case tc.wantIs != nil:
				require.ErrorIs(t, err, tc.wantIs)
			case tc.wantMsg != "":
				require.EqualError(t, err, tc.wantMsg)
			default:
				require.NoError(t, err)
			}
		})
	}
}
