package cluster

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kfn-dev/kfn/test/node/install"
)

// TestNATSRefusesClientsWithoutCredentials connects to kfn's NATS from
// the node, where no NetworkPolicy stands in the way (a pod of another
// namespace is dropped before it reaches NATS: TestAnotherNamespaceGetsNothingOfA,
// TestOtherNamespacesReachNoInternalPort): an anonymous client and an
// anonymous route are answered -ERR 'Authorization Violation', and a
// client with the event bridge's password from the chart's Secret is
// taken, so the refusals are NATS's. Fails when the shared install's NATS
// takes anonymous clients (nats.auth off). A second or two.
func TestNATSRefusesClientsWithoutCredentials(t *testing.T) {
	t.Parallel() // beside the other scenarios that leave the install as it is (doc.go)
	pod := podsOf(t, "app.kubernetes.io/component=nats")[0]
	route := net.JoinHostPort(pod.Status.PodIP, "6222")
	conn, err := net.DialTimeout("tcp", route, 10*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	r := bufio.NewReader(conn)
	info, err := r.ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(info, "INFO"), info)
	_, err = conn.Write([]byte("CONNECT {\"verbose\":false,\"name\":\"probe\",\"cluster\":\"kfn-nats\"}\r\nPING\r\n"))
	require.NoError(t, err)
	answer, err := r.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "-ERR 'Authorization Violation'", strings.TrimSpace(answer), "an anonymous route")

	cs := platform.cluster.Clientset
	svc, err := cs.CoreV1().Services(install.Namespace).Get(t.Context(), "kfn-nats", metav1.GetOptions{})
	require.NoError(t, err)
	url := "nats://" + net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port)))
	_, err = nats.Connect(url, nats.Timeout(10*time.Second))
	require.Error(t, err)
	assert.ErrorIs(t, err, nats.ErrAuthorization, "anonymous, from the node")
	secret, err := cs.CoreV1().Secrets(install.Namespace).Get(t.Context(), "kfn-nats-auth", metav1.GetOptions{})
	require.NoError(t, err, "the chart made the passwords")
	nc, err := nats.Connect(url, nats.Timeout(10*time.Second), nats.UserInfo("kfn-eventbridge", strings.TrimSpace(string(secret.Data["eventbridge"]))))
	require.NoError(t, err, "the event bridge's user")
	nc.Close()
}
