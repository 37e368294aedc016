package cluster

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/test/clusterinstall"
)

// natsProbe is a Function that, from its pod, opens NATS's client port
// (the Service) and the first server's route port, and answers the line
// NATS sends back to a CONNECT without credentials, one per port.
const natsProbe = `
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata:
  name: nats-probe
spec:
  runtime: python312
  source:
    inline:
      source: |
        import socket
        def ask(host, port, connect):
            try:
                s = socket.create_connection((host, port), timeout=5)
            except OSError as e:
                return "unreachable: %%s" %% e
            try:
                f = s.makefile("rb")
                f.readline()  # INFO
                s.sendall(connect + b"\r\nPING\r\n")
                while True:
                    line = f.readline().decode().strip()
                    if not line or line.startswith("-ERR") or line == "PONG":
                        return line or "closed"
            except OSError as e:
                return "error: %%s" %% e
            finally:
                s.close()
        def main(event, context):
            client = ask("kfn-nats.%[1]s.svc.cluster.local", 4222, b'CONNECT {"verbose":false,"pedantic":false,"name":"probe"}')
            route = ask("kfn-nats-0.kfn-nats-headless.%[1]s.svc.cluster.local", 6222, b'CONNECT {"verbose":false,"name":"probe","cluster":"kfn-nats"}')
            return "client: " + client + "\nroute: " + route
`

// TestNATSRefusesPodsWithoutCredentials runs a Function in a namespace of
// its own whose pod connects to kfn's NATS without credentials, as any pod
// could: the client port and a server's route port both answer
// -ERR 'Authorization Violation'. From the node, an anonymous client is
// refused and one with the event bridge's password from the chart's Secret
// is taken, so the refusals are NATS's, not an unreachable port. Fails
// when the shared install's NATS takes anonymous clients (nats.auth
// off). About a minute (the Function's build and start).
func TestNATSRefusesPodsWithoutCredentials(t *testing.T) {
	ns := namespace(t, "natsprobe")
	apply(t, ns, fmt.Sprintf(natsProbe, clusterinstall.Namespace))
	waitRunning(t, ns, "nats-probe", 3*time.Minute)
	waitAnswer(t, functionURL(t, ns, "nats-probe")+"/",
		"client: -ERR 'Authorization Violation'\nroute: -ERR 'Authorization Violation'")

	cs := platform.cluster.Clientset
	svc, err := cs.CoreV1().Services(clusterinstall.Namespace).Get(t.Context(), "kfn-nats", metav1.GetOptions{})
	require.NoError(t, err)
	url := "nats://" + net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port)))
	_, err = nats.Connect(url, nats.Timeout(10*time.Second))
	require.Error(t, err)
	assert.ErrorIs(t, err, nats.ErrAuthorization, "anonymous, from the node")
	secret, err := cs.CoreV1().Secrets(clusterinstall.Namespace).Get(t.Context(), "kfn-nats-auth", metav1.GetOptions{})
	require.NoError(t, err, "the chart made the passwords")
	nc, err := nats.Connect(url, nats.Timeout(10*time.Second), nats.UserInfo("kfn-eventbridge", strings.TrimSpace(string(secret.Data["eventbridge"]))))
	require.NoError(t, err, "the event bridge's user")
	nc.Close()
}
