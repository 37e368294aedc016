package gitsource

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
)

// ErrAuth is wrapped by Auth's errors: the Secret lacks a key or holds an
// unusable one.
var ErrAuth = errors.New("git credentials")

// Secret keys read by Auth.
const (
	KeyUsername      = "username"
	KeyPassword      = "password"
	KeySSHPrivateKey = "ssh-privatekey"
	// KeyLegacySSHKey is Kyma's older name of the private key.
	KeyLegacySSHKey = "key"
	// KeyPassphrase optionally decrypts the private key.
	KeyPassphrase = "passphrase"
	// KeyKnownHosts optionally pins the server's host keys (known_hosts
	// format); without it any host key is accepted, as in Kyma.
	KeyKnownHosts = "known_hosts"
)

// Auth returns the go-git credentials for repoURL from a Secret's data.
// basic needs username and password (a token as password works); key needs
// ssh-privatekey (or key), optionally passphrase and known_hosts. The SSH
// user is the URL's, "git" when it has none. Errors wrap ErrAuth.
func Auth(t v1alpha2.RepositoryAuthType, repoURL string, data map[string][]byte) (transport.AuthMethod, error) {
	switch t {
	case v1alpha2.RepositoryAuthBasic:
		user, pass := data[KeyUsername], data[KeyPassword]
		if len(user) == 0 || len(pass) == 0 {
			return nil, fmt.Errorf("%w: basic auth needs the Secret keys %s and %s", ErrAuth, KeyUsername, KeyPassword)
		}
		return &githttp.BasicAuth{Username: string(user), Password: string(pass)}, nil
	case v1alpha2.RepositoryAuthSSHKey:
		key := data[KeySSHPrivateKey]
		if len(key) == 0 {
			key = data[KeyLegacySSHKey]
		}
		if len(key) == 0 {
			return nil, fmt.Errorf("%w: key auth needs the Secret key %s", ErrAuth, KeySSHPrivateKey)
		}
		pk, err := gitssh.NewPublicKeys(sshUser(repoURL), key, string(data[KeyPassphrase]))
		if err != nil {
			return nil, fmt.Errorf("%w: parse %s: %w", ErrAuth, KeySSHPrivateKey, err)
		}
		pk.HostKeyCallback = ssh.InsecureIgnoreHostKey() //nolint:gosec // Kyma's behaviour without known_hosts; documented.
		if kh := data[KeyKnownHosts]; len(kh) > 0 {
			cb, err := pinnedHostKeys(kh)
			if err != nil {
				return nil, fmt.Errorf("%w: parse %s: %w", ErrAuth, KeyKnownHosts, err)
			}
			pk.HostKeyCallback = cb
		}
		return pk, nil
	default:
		return nil, fmt.Errorf("%w: unknown auth type %q: use basic or key", ErrAuth, t)
	}
}

// sshUser is the user of an ssh:// URL or of the scp-like form user@host:path.
func sshUser(repoURL string) string {
	if u, err := url.Parse(repoURL); err == nil && u.Scheme != "" && u.User != nil && u.User.Username() != "" {
		return u.User.Username()
	}
	if at := strings.Index(repoURL, "@"); at > 0 && !strings.Contains(repoURL[:at], "/") && !strings.Contains(repoURL, "://") {
		return repoURL[:at]
	}
	return "git"
}

// pinnedHostKeys accepts a server whose key is one of the known_hosts
// entries (host patterns are not consulted: the Secret belongs to one
// repository).
func pinnedHostKeys(knownHosts []byte) (ssh.HostKeyCallback, error) {
	var keys [][]byte
	rest := knownHosts
	for len(bytes.TrimSpace(rest)) > 0 {
		_, _, key, _, r, err := ssh.ParseKnownHosts(rest)
		if err != nil {
			return nil, err
		}
		keys = append(keys, key.Marshal())
		rest = r
	}
	if len(keys) == 0 {
		return nil, errors.New("no host key")
	}
	return func(host string, _ net.Addr, key ssh.PublicKey) error {
		k := key.Marshal()
		for _, want := range keys {
			if bytes.Equal(k, want) {
				return nil
			}
		}
		return fmt.Errorf("host key of %s is not in %s", host, KeyKnownHosts)
	}, nil
}
