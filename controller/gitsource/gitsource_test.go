package gitsource_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/gitsource"
	"github.com/kfn-dev/kfn/internal/egress"
	"github.com/kfn-dev/kfn/test/gittest"
)

// testEgress lets the tests' repositories, on loopback, be reached.
var testEgress = egress.Policy{AllowLoopback: true}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestResolve(t *testing.T) {
	repo := gittest.New(t, "", "")
	c1 := repo.Commit(t, map[string]string{"fn/handler.js": "v1"})
	repo.Tag(t, "v1", true)
	repo.Tag(t, "light", false)
	repo.Branch(t, "feature")
	c2 := repo.Commit(t, map[string]string{"fn/handler.js": "v2"})

	tests := map[string]struct {
		ref, want string
		err       error
	}{
		"branch":          {ref: "main", want: c1},
		"other branch":    {ref: "feature", want: c2},
		"annotated tag":   {ref: "v1", want: c1},
		"lightweight tag": {ref: "light", want: c1},
		"full ref name":   {ref: "refs/heads/feature", want: c2},
		"commit hash":     {ref: c1, want: c1},
		"upper-case commit hash, as Kyma accepts it": {ref: strings.ToUpper(c1), want: c1},
		"missing reference":                          {ref: "nope", err: gitsource.ErrReferenceNotFound},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := gitsource.Resolve(ctx(t), repo.URL, tc.ref, nil, testEgress)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestKymaReferences resolves and fetches gitRepository.reference as
// Kyma's documentation has it since serverless 1.13 (#2605): a branch, a
// tag or a commit SHA (in either case), including a release tag whose
// commit no branch reaches any more.
func TestKymaReferences(t *testing.T) {
	repo := gittest.New(t, "", "")
	onMain := repo.Commit(t, map[string]string{"fn/handler.js": "main"})
	repo.Branch(t, "release-1")
	released := repo.Commit(t, map[string]string{"fn/handler.js": "released"})
	repo.Tag(t, "v1.0.0", true)
	repo.Checkout(t, "main")
	repo.DeleteBranch(t, "release-1")
	repo.Commit(t, map[string]string{"fn/handler.js": "later"})

	for ref, want := range map[string]struct{ commit, content string }{
		"v1.0.0":                  {released, "released"},
		released:                  {released, "released"},
		strings.ToUpper(released): {released, "released"},
		onMain:                    {onMain, "main"},
	} {
		t.Run(ref, func(t *testing.T) {
			commit, err := gitsource.Resolve(ctx(t), repo.URL, ref, nil, testEgress)
			require.NoError(t, err)
			assert.Equal(t, want.commit, commit)
			dest := filepath.Join(t.TempDir(), "function")
			fetch := commit
			if len(ref) == 40 {
				fetch = ref // Fetch takes a SHA in either case too
			}
			require.NoError(t, gitsource.Fetch(ctx(t), gitsource.FetchOptions{URL: repo.URL, Commit: fetch, BaseDir: "fn", Dest: dest, WorkDir: t.TempDir(), Egress: testEgress}))
			b, err := os.ReadFile(filepath.Join(dest, "handler.js"))
			require.NoError(t, err)
			assert.Equal(t, want.content, string(b))
		})
	}
	_, err := gitsource.Resolve(ctx(t), repo.URL, released[:7], nil, testEgress)
	require.ErrorIs(t, err, gitsource.ErrReferenceNotFound, "an abbreviated SHA is no full commit SHA, as in Kyma")
}

func TestResolveBasicAuth(t *testing.T) {
	repo := gittest.New(t, "alice", "s3cret")
	c1 := repo.Commit(t, map[string]string{"a": "1"})

	_, err := gitsource.Resolve(ctx(t), repo.URL, "main", nil, testEgress)
	require.Error(t, err, "anonymous access is refused")

	auth, err := gitsource.Auth(v1alpha2.RepositoryAuthBasic, repo.URL, map[string][]byte{"username": []byte("alice"), "password": []byte("s3cret")})
	require.NoError(t, err)
	got, err := gitsource.Resolve(ctx(t), repo.URL, "main", auth, testEgress)
	require.NoError(t, err)
	assert.Equal(t, c1, got)

	bad, err := gitsource.Auth(v1alpha2.RepositoryAuthBasic, repo.URL, map[string][]byte{"username": []byte("alice"), "password": []byte("wrong")})
	require.NoError(t, err)
	_, err = gitsource.Resolve(ctx(t), repo.URL, "main", bad, testEgress)
	require.Error(t, err)
}

// githubKnownHosts is a known_hosts line for github.com with the key of
// the known_hosts case below.
const githubKnownHosts = "github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH6jTJjUpmqQuHbEnHZRv2O1XVhDSAXdHs8tbNTNX0nL\n"

// An ed25519 key made for this test only.
const testKey = `-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW
QyNTUxOQAAACB+o0yY1KZqkLh2xJx2Ub9jtV1YQ0gF3R7PLWzUzV9JywAAAJBpbm5laW5u
ZQAAAAtzc2gtZWQyNTUxOQAAACB+o0yY1KZqkLh2xJx2Ub9jtV1YQ0gF3R7PLWzUzV9Jyw
AAAEB0ZXN0dGVzdHRlc3R0ZXN0dGVzdHRlc3R0ZXN0dGVzdH6jTJjUpmqQuHbEnHZRv2O1
XVhDSAXdHs8tbNTNX0nLAAAAB3Rlc3RrZXkBAgMEBQY=
-----END OPENSSH PRIVATE KEY-----
`

func TestAuth(t *testing.T) {
	tests := map[string]struct {
		typ     v1alpha2.RepositoryAuthType
		url     string
		data    map[string]string
		wantErr bool
		check   func(t *testing.T, a any)
	}{
		"basic": {typ: "basic", data: map[string]string{"username": "u", "password": "p"}, check: func(t *testing.T, a any) {
			assert.Equal(t, &githttp.BasicAuth{Username: "u", Password: "p"}, a)
		}},
		"basic without password": {typ: "basic", data: map[string]string{"username": "u"}, wantErr: true},
		"key": {typ: "key", url: "git@github.com:org/repo.git", data: map[string]string{"ssh-privatekey": testKey, gitsource.KeyPlatformKnownHosts: githubKnownHosts}, check: func(t *testing.T, a any) {
			pk := a.(*gitssh.PublicKeys)
			assert.Equal(t, "git", pk.User)
			assert.Equal(t, []string{"ssh-ed25519"}, pk.HostKeyAlgorithms, "the algorithm of the known key")
		}},
		"legacy key name and ssh:// user": {typ: "key", url: "ssh://deploy@host/repo.git", data: map[string]string{"key": testKey, gitsource.KeyPlatformKnownHosts: githubKnownHosts}, check: func(t *testing.T, a any) {
			assert.Equal(t, "deploy", a.(*gitssh.PublicKeys).User)
			assert.Empty(t, a.(*gitssh.PublicKeys).HostKeyAlgorithms, "no key known for host")
		}},
		"scp-like user":                {typ: "key", url: "builder@host:repo.git", data: map[string]string{"ssh-privatekey": testKey, "known_hosts": githubKnownHosts}, check: func(t *testing.T, a any) { assert.Equal(t, "builder", a.(*gitssh.PublicKeys).User) }},
		"no known hosts at all":        {typ: "key", url: "git@github.com:org/repo.git", data: map[string]string{"ssh-privatekey": testKey}, wantErr: true},
		"platform known hosts garbage": {typ: "key", data: map[string]string{"ssh-privatekey": testKey, gitsource.KeyPlatformKnownHosts: "garbage"}, wantErr: true},
		"key missing":                  {typ: "key", data: map[string]string{"username": "u"}, wantErr: true},
		"key garbage":                  {typ: "key", data: map[string]string{"ssh-privatekey": "nope"}, wantErr: true},
		"known_hosts garbage":          {typ: "key", data: map[string]string{"ssh-privatekey": testKey, "known_hosts": "garbage"}, wantErr: true},
		"unknown type":                 {typ: "token", data: map[string]string{}, wantErr: true},
		"known_hosts pins keys":        {typ: "key", data: map[string]string{"ssh-privatekey": testKey, "known_hosts": "github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH6jTJjUpmqQuHbEnHZRv2O1XVhDSAXdHs8tbNTNX0nL\n"}, check: func(t *testing.T, a any) { assert.NotNil(t, a.(*gitssh.PublicKeys).HostKeyCallback) }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			data := map[string][]byte{}
			for k, v := range tc.data {
				data[k] = []byte(v)
			}
			a, err := gitsource.Auth(tc.typ, tc.url, data)
			if tc.wantErr {
				require.ErrorIs(t, err, gitsource.ErrAuth)
				return
			}
			require.NoError(t, err)
			tc.check(t, a)
		})
	}
}

func TestFetch(t *testing.T) {
	repo := gittest.New(t, "", "")
	c1 := repo.Commit(t, map[string]string{"fns/hello/handler.js": "v1", "fns/hello/lib/util.js": "u", "README": "r"})
	repo.Commit(t, map[string]string{"fns/hello/handler.js": "v2"})

	dest := filepath.Join(t.TempDir(), "function")
	require.NoError(t, gitsource.Fetch(ctx(t), gitsource.FetchOptions{URL: repo.URL, Commit: c1, BaseDir: "/fns/hello/", Dest: dest, WorkDir: t.TempDir(), Egress: testEgress}))
	b, err := os.ReadFile(filepath.Join(dest, "handler.js"))
	require.NoError(t, err)
	assert.Equal(t, "v1", string(b), "the commit asked for, not the branch's head")
	_, err = os.Stat(filepath.Join(dest, "lib", "util.js"))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dest, "README"))
	require.True(t, os.IsNotExist(err), "only baseDir is copied")

	err = gitsource.Fetch(ctx(t), gitsource.FetchOptions{URL: repo.URL, Commit: c1, BaseDir: "missing", Dest: t.TempDir(), Egress: testEgress})
	require.ErrorIs(t, err, gitsource.ErrInvalidFetch)
	err = gitsource.Fetch(ctx(t), gitsource.FetchOptions{URL: repo.URL, Commit: "main", Dest: t.TempDir(), Egress: testEgress})
	require.ErrorIs(t, err, gitsource.ErrInvalidFetch)

	root := t.TempDir()
	require.NoError(t, gitsource.Fetch(ctx(t), gitsource.FetchOptions{URL: repo.URL, Commit: c1, BaseDir: "../..", Dest: root, Egress: testEgress}), "a base dir cannot climb out of the repository")
	_, err = os.Stat(filepath.Join(root, "README"))
	require.NoError(t, err)
}
