package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/gitsource"
	"github.com/kfn-dev/kfn/internal/egress"
)

// fetchSource is the fetch-source init container: it copies a Git
// Function's directory at the resolved commit into the function volume.
// Credentials are the files of the mounted Secret in --auth-dir.
func fetchSource(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("fetch-source", flag.ContinueOnError)
	url := fs.String("url", "", "repository URL")
	ref := fs.String("reference", "", "branch, tag or commit asked for (for messages)")
	commit := fs.String("commit", "", "full commit hash to check out")
	baseDir := fs.String("base-dir", "", "directory of the repository to copy")
	dest := fs.String("dest", "", "directory to copy into")
	authType := fs.String("auth-type", "", "basic or key; empty for a public repository")
	authDir := fs.String("auth-dir", "", "directory of the credentials Secret's files")
	allowLoopback := fs.Bool("allow-loopback", false, "reach repositories on loopback or a path on this machine (tests only; the controller never sets it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var auth transport.AuthMethod
	if *authType != "" {
		data, err := readSecretDir(*authDir)
		if err != nil {
			return err
		}
		if auth, err = gitsource.Auth(v1alpha2.RepositoryAuthType(*authType), *url, data); err != nil {
			return err
		}
	}
	// The policy the controller resolved the reference under, but for
	// the address it talks to the API server at, which a pod does not use.
	policy := egress.Policy{AllowLoopback: *allowLoopback, Deny: egress.DenyAPIServer(egress.APIServerService())}
	if err := gitsource.Fetch(ctx, gitsource.FetchOptions{URL: *url, Commit: *commit, BaseDir: *baseDir, Dest: *dest, Auth: auth, Egress: policy}); err != nil {
		return fmt.Errorf("fetch %s (%s) at %s: %w", *url, *ref, *commit, err)
	}
	fmt.Printf("fetched %s of %s at %s (%s) into %s\n", *baseDir, *url, *commit, *ref, *dest)
	return nil
}

// readSecretDir reads a mounted Secret: one file per key (Kubernetes'
// ..data symlinks and hidden entries are skipped).
func readSecretDir(dir string) (map[string][]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read credentials: %w", err)
	}
	data := map[string][]byte{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read credentials: %w", err)
		}
		data[e.Name()] = b
	}
	return data, nil
}
