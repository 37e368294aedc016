package testcluster

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kfn-dev/kfn/internal/tail"
)

// output keeps the last output of etcd and of the API server.
type output struct {
	etcd, apiServer *tail.Buffer
}

// String quotes the output for an error message, or is empty if there is none.
func (o *output) String() string {
	return quote("etcd", o.etcd) + quote("kube-apiserver", o.apiServer)
}

func quote(name string, b *tail.Buffer) string {
	out := strings.TrimSpace(b.String())
	if out == "" {
		return ""
	}
	return fmt.Sprintf("\n--- last output of %s ---\n%s", name, out)
}

// outputWriter sends a process's output to b, and also to the test's
// own output when KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT=true asks for it,
// as envtest would.
func outputWriter(b *tail.Buffer, attached io.Writer) io.Writer {
	if os.Getenv("KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT") == "true" {
		return io.MultiWriter(b, attached)
	}
	return b
}
