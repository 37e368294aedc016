package activation

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// DefaultSubject is the core NATS subject of activations.
const DefaultSubject = "kfn.scaler.activated"

// ClaimedSubject is the core NATS subject of the event bridges' answers
// to activations, in the same message (Encode, Decode): the claim of a
// standby pod that the Function's activation started has ended (a pod
// serves the Function, or none was given), or none was started. The
// scalers hold KEDA's activation until then, for a bounded time, so that
// KEDA's scale-up does not take the node's CPU from the claim and the
// first delivery (the scaler's -claim-hold).
const ClaimedSubject = "kfn.scaler.claimed"

// MaxBytes bounds a message.
const MaxBytes = 1 << 10

// dnsLabel is an RFC 1123 label, as Kubernetes names namespaces and
// Functions.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// ErrInvalid is wrapped by every error of [Decode].
var ErrInvalid = errors.New("invalid activation")

// message is an activation on the wire.
type message struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// Encode returns the message of Function fn's activation.
func Encode(fn types.NamespacedName) []byte {
	b, _ := json.Marshal(message{Namespace: fn.Namespace, Name: fn.Name}) // two strings: cannot fail
	return b
}

// Decode returns the Function a message activates: a namespace and a name
// that are DNS labels, in at most MaxBytes, no other field.
func Decode(b []byte) (types.NamespacedName, error) {
	if len(b) > MaxBytes {
		return types.NamespacedName{}, fmt.Errorf("%w: %d bytes, at most %d", ErrInvalid, len(b), MaxBytes)
	}
	var m message
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return types.NamespacedName{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if dec.More() {
		return types.NamespacedName{}, fmt.Errorf("%w: more than one message", ErrInvalid)
	}
	for what, s := range map[string]string{"namespace": m.Namespace, "name": m.Name} {
		if !dnsLabel.MatchString(s) {
			return types.NamespacedName{}, fmt.Errorf("%w: %s %q is not a DNS label (lower-case letters, digits and '-', at most 63)", ErrInvalid, what, s)
		}
	}
	return types.NamespacedName{Namespace: m.Namespace, Name: m.Name}, nil
}
