package function_test

import (
	"bytes"
	"crypto/ed25519"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/resources"
	"github.com/kfn-dev/kfn/test/fntest"
	"github.com/kfn-dev/kfn/test/gittest"
)

// sshHostKey is the host key of the SSH Git servers the installation's
// known hosts (sshKnownHosts, the controller's configuration in these
// tests) name, for any port on loopback.
var sshHostKey = func() ssh.Signer {
	s, err := ssh.NewSignerFromKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize)))
	if err != nil {
		panic(err)
	}
	return s
}()

var sshKnownHosts = "[127.0.0.1]:* " + string(ssh.MarshalAuthorizedKey(sshHostKey.PublicKey()))

// TestGitOverSSHChecksHostKeys resolves a Git Function's reference over
// SSH with the controller's known hosts: a server with the known key is
// used, and the pods' fetch gets the same known hosts (the API server
// takes the downward API volume); a server with another key is refused
// with SourceUpdateFailed and a message that says what to add, and runs
// nothing.
func TestGitOverSSHChecksHostKeys(t *testing.T) {
	repo := gittest.New(t, "", "")
	c1 := repo.Commit(t, map[string]string{"fn/handler.js": "v1"})
	clientPEM, clientKey := gittest.NewKey(t)
	known := repo.ServeSSH(t, clientKey.PublicKey(), sshHostKey)
	unknown := repo.ServeSSH(t, clientKey.PublicKey(), nil)
	ns := namespace(t)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "deploy-key", Namespace: ns},
		Data: map[string][]byte{"ssh-privatekey": clientPEM}}
	require.NoError(t, cluster.Client.Create(testCtx(t), secret))
	auth := &v1alpha2.RepositoryAuth{Type: v1alpha2.RepositoryAuthSSHKey, SecretName: "deploy-key"}

	fn := create(t, fntest.Function("known", ns, fntest.Git(known.URL(), "fn", "main", auth)))
	key := client.ObjectKeyFromObject(fn)
	got := condition(t, key, v1alpha2.ConditionConfigurationReady, metav1.ConditionTrue, v1alpha2.ReasonSourceUpdated)
	assert.Equal(t, c1, got.Status.GitRepository.Commit)
	d := deploymentOf(t, key)
	assert.Equal(t, sshKnownHosts, d.Spec.Template.Annotations[resources.AnnotationGitKnownHosts])

	fn = create(t, fntest.Function("unknown", ns, fntest.Git(unknown.URL(), "fn", "main", auth)))
	key = client.ObjectKeyFromObject(fn)
	got = condition(t, key, v1alpha2.ConditionConfigurationReady, metav1.ConditionFalse, v1alpha2.ReasonSourceUpdateFailed)
	msg := got.Status.Condition(v1alpha2.ConditionConfigurationReady).Message
	assert.True(t, strings.Contains(msg, "is not known: add it to the Secret's known_hosts"), msg)
	assert.False(t, get(t, key, &appsv1.Deployment{}))
	assert.Zero(t, unknown.Sessions(), "the controller never authenticated to it")
}
