package gitsource

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // OpenSSH's hashed known_hosts names are HMAC-SHA1.
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"slices"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// hostKeys are the SSH host keys a repository's server may present: the
// Secret's known_hosts, each key good for any host (the Secret belongs to
// one repository), and the installation's known hosts, each key good for
// the hosts its line names.
type hostKeys struct {
	pinned   []ssh.PublicKey
	platform []knownHost
}

// knownHost is one line of a known_hosts file.
type knownHost struct {
	patterns []string
	key      ssh.PublicKey
	revoked  bool
}

// parseKnownHosts reads a known_hosts file; a line marked @cert-authority
// is refused (host certificates are not supported).
func parseKnownHosts(b []byte) ([]knownHost, error) {
	var out []knownHost
	rest := b
	for len(bytes.TrimSpace(rest)) > 0 {
		marker, hosts, key, _, r, err := ssh.ParseKnownHosts(rest)
		if err != nil {
			return nil, err
		}
		if marker == "cert-authority" {
			return nil, errors.New("@cert-authority lines are not supported: list the hosts' keys")
		}
		out = append(out, knownHost{patterns: hosts, key: key, revoked: marker == "revoked"})
		rest = r
	}
	return out, nil
}

// newHostKeys reads the Secret's pins and the installation's known hosts.
// Both empty is an error: no server could be trusted.
func newHostKeys(pinned, platform []byte) (*hostKeys, error) {
	h := &hostKeys{}
	if len(bytes.TrimSpace(pinned)) > 0 {
		lines, err := parseKnownHosts(pinned)
		if err != nil {
			return nil, fmt.Errorf("%w: parse %s: %w", ErrAuth, KeyKnownHosts, err)
		}
		if len(lines) == 0 {
			return nil, fmt.Errorf("%w: %s has no host key", ErrAuth, KeyKnownHosts)
		}
		for _, l := range lines {
			h.pinned = append(h.pinned, l.key)
		}
	}
	if len(bytes.TrimSpace(platform)) > 0 {
		lines, err := parseKnownHosts(platform)
		if err != nil {
			return nil, fmt.Errorf("%w: parse the installation's known hosts: %w", ErrAuth, err)
		}
		h.platform = lines
	}
	if len(h.pinned) == 0 && len(h.platform) == 0 {
		return nil, fmt.Errorf("%w: no SSH host keys to check the server's against: add the server's keys to the Secret's %s, or ask the administrator to add them to the installation's known hosts (chart value git.knownHosts)", ErrAuth, KeyKnownHosts)
	}
	return h, nil
}

// forHost returns the keys the server at address (host, or host:port) may
// present: the pins and the installation's keys for that host, none of
// them revoked.
func (h *hostKeys) forHost(address string) []ssh.PublicKey {
	host := knownhosts.Normalize(address)
	var revoked [][]byte
	for _, l := range h.platform {
		if l.revoked {
			revoked = append(revoked, l.key.Marshal())
		}
	}
	isRevoked := func(k ssh.PublicKey) bool {
		return slices.ContainsFunc(revoked, func(r []byte) bool { return bytes.Equal(r, k.Marshal()) })
	}
	var out []ssh.PublicKey
	for _, k := range h.pinned {
		if !isRevoked(k) {
			out = append(out, k)
		}
	}
	for _, l := range h.platform {
		if !l.revoked && matchesHost(l.patterns, host) && !isRevoked(l.key) {
			out = append(out, l.key)
		}
	}
	return out
}

// callback is the ssh.HostKeyCallback that accepts a server only with one
// of the keys forHost returns for the address dialled.
func (h *hostKeys) callback() ssh.HostKeyCallback {
	return func(hostname string, _ net.Addr, key ssh.PublicKey) error {
		k := key.Marshal()
		for _, want := range h.forHost(hostname) {
			if bytes.Equal(k, want.Marshal()) {
				return nil
			}
		}
		return fmt.Errorf("%w: the host key of %s (%s %s) is not known: add it to the Secret's %s, or ask the administrator to add it to the installation's known hosts (chart value git.knownHosts)",
			ErrAuth, hostname, key.Type(), ssh.FingerprintSHA256(key), KeyKnownHosts)
	}
}

// algorithms are the host key algorithms to ask the server at address
// for: those of the keys that would be accepted, so that a server with
// several keys presents one that is known.
func (h *hostKeys) algorithms(address string) []string {
	var out []string
	add := func(a ...string) {
		for _, x := range a {
			if !slices.Contains(out, x) {
				out = append(out, x)
			}
		}
	}
	for _, k := range h.forHost(address) {
		if k.Type() == ssh.KeyAlgoRSA {
			add(ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA)
			continue
		}
		add(k.Type())
	}
	return out
}

// matchesHost reports whether a known_hosts line's host patterns match
// host (normalized: "host" for port 22, "[host]:port" otherwise): a
// hashed name (|1|salt|hash), a name or a pattern with * and ?, and no
// negated pattern (!pattern) that matches.
func matchesHost(patterns []string, host string) bool {
	matched := false
	for _, p := range patterns {
		negated := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(p, "!")
		if !patternMatches(p, host) {
			continue
		}
		if negated {
			return false
		}
		matched = true
	}
	return matched
}

func patternMatches(pattern, host string) bool {
	if salt, sum, ok := hashedName(pattern); ok {
		mac := hmac.New(sha1.New, salt)
		mac.Write([]byte(host))
		return hmac.Equal(mac.Sum(nil), sum)
	}
	// OpenSSH's patterns know only * and ?: brackets ([host]:port) are
	// literal, so they are escaped for path.Match.
	escaped := strings.NewReplacer(`\`, `\\`, `[`, `\[`, `]`, `\]`).Replace(strings.ToLower(pattern))
	ok, err := path.Match(escaped, strings.ToLower(host))
	return err == nil && ok
}

// hashedName decodes OpenSSH's hashed host name |1|base64(salt)|base64(hash).
func hashedName(p string) (salt, sum []byte, ok bool) {
	rest, found := strings.CutPrefix(p, "|1|")
	if !found {
		return nil, nil, false
	}
	s, h, found := strings.Cut(rest, "|")
	if !found {
		return nil, nil, false
	}
	salt, err1 := base64.StdEncoding.DecodeString(s)
	sum, err2 := base64.StdEncoding.DecodeString(h)
	return salt, sum, err1 == nil && err2 == nil
}

// sshAddress is the host:port an SSH repository URL dials: ssh://[user@]
// host[:port]/path, or the scp-like [user@]host:path (port 22).
func sshAddress(repoURL string) string {
	if u, err := url.Parse(repoURL); err == nil && u.Scheme != "" && u.Host != "" {
		port := u.Port()
		if port == "" {
			port = "22"
		}
		return net.JoinHostPort(u.Hostname(), port)
	}
	host := repoURL
	if at := strings.Index(host, "@"); at >= 0 {
		host = host[at+1:]
	}
	host, _, _ = strings.Cut(host, ":")
	return net.JoinHostPort(host, "22")
}
