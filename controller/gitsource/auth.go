package gitsource

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"

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
	// format; the host names are not consulted: the Secret belongs to one
	// repository).
	KeyKnownHosts = "known_hosts"
	// KeyPlatformKnownHosts is not a key of the user's Secret: it holds
	// the installation's known hosts (known_hosts format, by host name),
	// which the controller adds to the Secret's data and the fetch-source
	// container finds as a file beside the Secret's.
	KeyPlatformKnownHosts = "kfn-platform-known-hosts"
)

// Auth returns the go-git credentials for repoURL from a Secret's data.
// basic needs username and password (a token as password works); key needs
// ssh-privatekey (or key), optionally passphrase and known_hosts. The SSH
// user is the URL's, "git" when it has none. An SSH server is accepted only
// with a host key that known_hosts pins or that the installation's known
// hosts (KeyPlatformKnownHosts) list for its host; with neither, Auth
// fails. Errors wrap ErrAuth, and so does the connection's error for an
// unknown host key.
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
		keys, err := newHostKeys(data[KeyKnownHosts], data[KeyPlatformKnownHosts])
		if err != nil {
			return nil, err
		}
		pk.HostKeyCallback = keys.callback()
		pk.HostKeyAlgorithms = keys.algorithms(sshAddress(repoURL))
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
