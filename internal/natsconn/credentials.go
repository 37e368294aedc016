package natsconn

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// Credentials are how a server proves itself to NATS and checks NATS in
// turn. Each secret comes from a file (a mounted Secret), never from a flag
// or the environment. The zero value connects anonymously, without TLS
// unless the URL says tls://.
type Credentials struct {
	// User is the NATS user name; it goes with PasswordFile.
	User string
	// PasswordFile holds User's password (surrounding white space is
	// ignored). It is read again before each (re)connect, so that a
	// rotated Secret takes effect on the next connection.
	PasswordFile string
	// CredsFile is a NATS credentials file (a user JWT and its nkey seed),
	// for a NATS with decentralised accounts; not with User.
	CredsFile string
	// CAFile holds the CA certificates (PEM) the server's certificate is
	// checked against; set, the connection requires TLS.
	CAFile string
}

// ErrInvalidCredentials is wrapped by every error of Credentials.Validate.
var ErrInvalidCredentials = errors.New("invalid NATS credentials")

// RegisterFlags binds the credentials to flags of fs: -nats-user,
// -nats-password-file, -nats-creds-file and -nats-ca-file.
func (c *Credentials) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.User, "nats-user", c.User, "NATS user name (with -nats-password-file); empty: no user")
	fs.StringVar(&c.PasswordFile, "nats-password-file", c.PasswordFile, "file holding the password of -nats-user (read again before each reconnect)")
	fs.StringVar(&c.CredsFile, "nats-creds-file", c.CredsFile, "NATS credentials file (user JWT and nkey seed) for a NATS with decentralised accounts; not with -nats-user")
	fs.StringVar(&c.CAFile, "nats-ca-file", c.CAFile, "CA certificates (PEM) NATS's server certificate must be signed by; set, the connection requires TLS")
}

// Validate returns an error wrapping ErrInvalidCredentials that says what
// to fix: a user needs a password file and a password file a user, and a
// credentials file excludes a user. The files are read by Connect.
func (c Credentials) Validate() error {
	switch {
	case (c.User == "") != (c.PasswordFile == ""):
		return fmt.Errorf("%w: -nats-user and -nats-password-file go together", ErrInvalidCredentials)
	case c.User != "" && c.CredsFile != "":
		return fmt.Errorf("%w: -nats-creds-file excludes -nats-user", ErrInvalidCredentials)
	}
	return nil
}

// options are the nats.go options of c.
func (c Credentials) options() ([]nats.Option, error) {
	var opts []nats.Option
	if c.User != "" {
		first, err := readPassword(c.PasswordFile)
		if err != nil {
			return nil, err
		}
		// The last password read stands when a later read fails (a Secret
		// being updated): the server says whether it still holds.
		var mu sync.Mutex
		last := first
		opts = append(opts, nats.UserInfoHandler(func() (string, string) {
			mu.Lock()
			defer mu.Unlock()
			if p, err := readPassword(c.PasswordFile); err == nil {
				last = p
			}
			return c.User, last
		}))
	}
	if c.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	}
	if c.CAFile != "" {
		opts = append(opts, nats.RootCAs(c.CAFile))
	}
	return opts, nil
}

func readPassword(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read NATS password: %w", err)
	}
	p := strings.TrimSpace(string(b))
	if p == "" {
		return "", fmt.Errorf("read NATS password: %s is empty", file)
	}
	return p, nil
}
