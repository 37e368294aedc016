package trigger

import (
	"errors"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/types"

	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
)

// Type is the type of the one trigger of a Function's ScaledObject: KEDA's
// push-capable external scaler. The scaler also serves type "external"
// (polling only) with the same metadata.
const Type = "external-push"

// Keys of the trigger metadata.
const (
	// KeyScalerAddress is the scaler's gRPC address, host:port (read by
	// KEDA, not by the scaler).
	KeyScalerAddress = "scalerAddress"
	// KeyFunctionNamespace is the Function's namespace (default, and the
	// only one allowed: the ScaledObject's).
	KeyFunctionNamespace = "functionNamespace"
	// KeyFunctionName is the Function's name (default: the
	// ScaledObject's).
	KeyFunctionName = "functionName"
	// KeyTargetBacklog is the waiting events per replica, a decimal integer
	// >= 1 (default serverless v1alpha2 DefaultTargetBacklog).
	KeyTargetBacklog = "targetBacklog"
	// KeyTargetConcurrency is the concurrent gateway requests per replica, a
	// decimal integer >= 1 (default serverless v1alpha2
	// DefaultTargetConcurrency).
	KeyTargetConcurrency = "targetConcurrency"
)

// ErrInvalidMetadata is wrapped by every error of [Parse].
var ErrInvalidMetadata = errors.New("invalid trigger metadata")

// Metadata is what a trigger's metadata says.
type Metadata struct {
	// ScalerAddress is the scaler's gRPC address; Parse leaves it empty when
	// absent (KEDA needs it, the scaler does not).
	ScalerAddress string
	// Function is the Function the ScaledObject scales.
	Function types.NamespacedName
	// TargetBacklog is the waiting events per replica.
	TargetBacklog int32
	// TargetConcurrency is the concurrent gateway requests per replica.
	TargetConcurrency int32
}

// Render returns the trigger metadata of m, as the controller writes it:
// every key set (scalerAddress only when not empty), numbers in decimal.
func (m Metadata) Render() map[string]string {
	out := map[string]string{
		KeyFunctionNamespace: m.Function.Namespace,
		KeyFunctionName:      m.Function.Name,
		KeyTargetBacklog:     strconv.FormatInt(int64(m.TargetBacklog), 10),
		KeyTargetConcurrency: strconv.FormatInt(int64(m.TargetConcurrency), 10),
	}
	if m.ScalerAddress != "" {
		out[KeyScalerAddress] = m.ScalerAddress
	}
	return out
}

// Parse reads trigger metadata md of the ScaledObject namespace/name. A
// missing Function namespace or name is the ScaledObject's; a Function
// namespace other than the ScaledObject's (when known) is refused; a missing or
// empty target is its default. Other keys (KEDA's own) are ignored. The
// error wraps ErrInvalidMetadata and names the key to fix.
func Parse(md map[string]string, namespace, name string) (Metadata, error) {
	m := Metadata{
		ScalerAddress: md[KeyScalerAddress],
		Function:      types.NamespacedName{Namespace: md[KeyFunctionNamespace], Name: md[KeyFunctionName]},
	}
	if m.Function.Namespace == "" {
		m.Function.Namespace = namespace
	}
	if namespace != "" && m.Function.Namespace != namespace {
		// A ScaledObject scales on its own namespace's Functions only: its
		// status and HPA are readable where it lives, and would otherwise
		// show another tenant's backlog.
		return Metadata{}, fmt.Errorf("%w: %s %q is not the ScaledObject's namespace %q", ErrInvalidMetadata, KeyFunctionNamespace, m.Function.Namespace, namespace)
	}
	if m.Function.Name == "" {
		m.Function.Name = name
	}
	if m.Function.Namespace == "" || m.Function.Name == "" {
		return Metadata{}, fmt.Errorf("%w: no Function: set %s and %s", ErrInvalidMetadata, KeyFunctionNamespace, KeyFunctionName)
	}
	var err error
	if m.TargetBacklog, err = target(md, KeyTargetBacklog, serverlessv1alpha2.DefaultTargetBacklog); err != nil {
		return Metadata{}, err
	}
	if m.TargetConcurrency, err = target(md, KeyTargetConcurrency, serverlessv1alpha2.DefaultTargetConcurrency); err != nil {
		return Metadata{}, err
	}
	return m, nil
}

func target(md map[string]string, key string, def int32) (int32, error) {
	v := md[key]
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%w: %s=%q: must be an integer >= 1", ErrInvalidMetadata, key, v)
	}
	return int32(n), nil
}
