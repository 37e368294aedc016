//go:build unix

package project_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/api/manifest"
	"github.com/kfn-dev/kfn/local/project"
)

// withoutFreeFiles runs f while the process cannot open one more file: its
// soft RLIMIT_NOFILE is lowered to its lowest free descriptor, so every
// open fails with EMFILE ("too many open files"), as when kfn dev's
// descriptors are all taken. It is a real failure of the system call, not
// a fake; the tests of this package never run in parallel, so nothing else
// of the test process opens a file meanwhile.
func withoutFreeFiles(t *testing.T, f func()) {
	t.Helper()
	var lim syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	probe, err := os.Open(os.DevNull)
	require.NoError(t, err)
	lowest := uint64(probe.Fd()) // every descriptor below it is open
	require.NoError(t, probe.Close())
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: lowest, Max: lim.Max}))
	defer func() { require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)) }()
	_, err = os.Open(os.DevNull)
	require.ErrorIs(t, err, syscall.EMFILE, "the lowered limit makes opens fail")
	f()
}

// A project directory that cannot be listed (the process is out of file
// descriptors) is not a project whose files were all deleted: what it
// defined keeps running as it was, the error says why, and the project is
// marked for reading again.
func TestLoadKeepsEverythingWhenTheDirectoryCannotBeRead(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"orders/config.yaml": "name: orders\nruntime: nodejs22\nsubscriptions: [{source: shop, types: [order.created.v1]}]\n",
		"orders/handler.js":  "module.exports = { main: () => 'v1' }\n",
		"app.yaml": `apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata: {name: a, namespace: bank}
spec: {runtime: nodejs22, source: {inline: {source: "module.exports = { main: () => 'a' }"}}}
---
apiVersion: eventing.kyma-project.io/v1alpha2
kind: Subscription
metadata: {name: a, namespace: bank}
spec: {sink: "http://a.bank.svc.cluster.local", source: bank, types: [payment.booked.v1]}
---
apiVersion: v1
kind: Secret
metadata: {name: token, namespace: bank}
stringData: {token: s3cret}
`,
	})
	before := load(t, dir)
	require.Empty(t, before.Invalid)
	require.False(t, before.ReadFailed)
	names := func(p *project.Project) []string {
		var out []string
		for _, fn := range p.Functions {
			out = append(out, "Function "+fn.Namespace+"/"+fn.Name)
		}
		for _, s := range p.Subscriptions {
			out = append(out, "Subscription "+s.Namespace+"/"+s.Name)
		}
		for _, d := range p.Ignored {
			out = append(out, d.Object.GetKind()+" "+d.Object.GetNamespace()+"/"+d.Object.GetName())
		}
		return out
	}
	all := []string{"Function default/orders", "Subscription default/orders", "Function bank/a", "Subscription bank/a", "Secret bank/token"}
	require.ElementsMatch(t, all, names(before))

	a := admitter(t)
	var p *project.Project
	var err error
	withoutFreeFiles(t, func() { p, err = project.Load(t.Context(), dir, a) })
	require.NoError(t, err)
	require.NotEmpty(t, p.Invalid, "the read error is reported")
	assert.ErrorIs(t, p.Invalid[0], syscall.EMFILE)
	assert.True(t, p.ReadFailed, "the project is to be read again")
	p.KeepFrom(before)
	assert.ElementsMatch(t, all, names(p), "nothing is removed because the directory could not be listed")
	assert.Equal(t, filepath.Join(dir, "orders"), p.Sources["default/orders"])

	// Read again with descriptors free: the same project, and a file
	// that is really gone is gone.
	require.NoError(t, os.Remove(filepath.Join(dir, "app.yaml")))
	again := load(t, dir)
	assert.False(t, again.ReadFailed)
	again.KeepFrom(p)
	assert.ElementsMatch(t, []string{"Function default/orders", "Subscription default/orders"}, names(again))
}

func admitter(t *testing.T) *manifest.Admitter {
	t.Helper()
	a, err := manifest.NewAdmitter()
	require.NoError(t, err)
	return a
}
