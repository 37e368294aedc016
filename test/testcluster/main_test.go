package testcluster

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// tests stands for a package's tests: it records what it saw of the
// cluster and returns code.
type tests struct {
	code int
	run  func()
}

func (t tests) Run() int {
	if t.run != nil {
		t.run()
	}
	return t.code
}

// TestMainRunsTheTestsAgainstOneCluster runs Main's steps against a real
// cluster: setup sees it, the tests use it, teardown runs before the
// cluster stops, the tests' code is the result, and a failing setup or
// start makes it 1 without running a test.
func TestMainRunsTheTestsAgainstOneCluster(t *testing.T) {
	var cluster *Cluster
	var steps []string
	setup := func(c *Cluster) (func(), error) {
		steps = append(steps, "setup")
		_, err := Into(&cluster)(c)
		return func() { steps = append(steps, "teardown") }, err
	}
	var stderr bytes.Buffer
	code := run(tests{code: 3, run: func() {
		steps = append(steps, "tests")
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "main"}}
		assert.NoError(t, cluster.Client.Create(t.Context(), ns), "the tests reach the API server")
	}}, setup, &stderr, func() (*Cluster, error) { return Start() })
	assert.Equal(t, 3, code, "the tests' code")
	assert.Equal(t, []string{"setup", "tests", "teardown"}, steps)
	assert.Empty(t, stderr.String())
	require.Error(t, cluster.Client.List(t.Context(), &corev1.NamespaceList{}), "the cluster is stopped")

	t.Run("a failing setup runs no test", func(t *testing.T) {
		var stderr bytes.Buffer
		ran := false
		code := run(tests{run: func() { ran = true }}, func(*Cluster) (func(), error) { return nil, errors.New("no CRD") },
			&stderr, func() (*Cluster, error) { return Start() })
		assert.Equal(t, 1, code)
		assert.False(t, ran)
		assert.Contains(t, stderr.String(), "no CRD")
	})
	t.Run("a cluster that cannot start runs no test", func(t *testing.T) {
		var stderr bytes.Buffer
		ran := false
		code := run(tests{run: func() { ran = true }}, Into(&cluster), &stderr,
			func() (*Cluster, error) { return Start(WithStartTimeout(-1)) })
		assert.Equal(t, 1, code)
		assert.False(t, ran)
		assert.Contains(t, stderr.String(), "start timeout must be positive")
	})
}

func TestLazyStartsOnlyWhenAsked(t *testing.T) {
	var stderr bytes.Buffer
	var l Lazy
	assert.Equal(t, 0, l.main(tests{}, &stderr), "no test asked: nothing to stop")
	assert.Nil(t, l.cluster)

	l = Lazy{Options: []Option{WithoutKfnCRDs()}}
	var c *Cluster
	code := l.main(tests{code: 2, run: func() {
		c = l.Get(t)
		assert.Same(t, c, l.Get(t), "one cluster for every test")
		assert.Empty(t, c.CRDs, "the options apply")
	}}, &stderr)
	assert.Equal(t, 2, code)
	require.NotNil(t, c)
	require.Error(t, c.Client.List(t.Context(), &corev1.NamespaceList{}), "stopped after the tests")
	assert.Empty(t, stderr.String())
}
