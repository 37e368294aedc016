package project_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/api/manifest"
	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/local/project"
)

func write(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(root, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
}

func load(t *testing.T, dir string) *project.Project {
	t.Helper()
	a, err := manifest.NewAdmitter()
	require.NoError(t, err)
	p, err := project.Load(context.Background(), dir, a)
	require.NoError(t, err)
	return p
}

func TestLoadManifestsAndFolders(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"manifests/app.yaml": `apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata: {name: orders}
spec:
  runtime: nodejs22
  source: {inline: {source: "module.exports = { main: () => 'ok' }"}}
---
apiVersion: v1
kind: Service
metadata: {name: external}
`,
		"fulfil/config.yaml": `name: fulfil
runtime: nodejs22
scaleConfig: {minReplicas: 0, maxReplicas: 3}
env:
  - name: MODE
    value: fast
subscriptions:
  - source: shop
    types: [order.created.v1]
    config: {maxInFlightMessages: "1"}
apiRules:
  - name: fulfil
schemaVersion: v1
`,
		"fulfil/handler.js":    "module.exports = { main: () => 'fulfilled' }",
		"fulfil/package.json":  `{"name": "fulfil", "dependencies": {}}`,
		"notify/config.yaml":   "name: notify\nnamespace: shop\nruntime: python312\n",
		"notify/handler.py":    "def main(event, context):\n    return 'sent'\n",
		"esm/config.yaml":      "name: esm\nruntime: nodejs24\n",
		"esm/handler.mjs":      "export function main() { return 1 }",
		"node_modules/x.yaml":  "this: [is not read",
		".kfn/state.yaml":      "neither: [is this",
		"docs/mkdocs.yml":      "site_name: not a manifest but harmless\n",
		"fulfil/tsconfig.json": "{}",
	})
	p := load(t, dir)
	require.Len(t, p.Invalid, 1, "%v", p.Invalid)
	assert.Contains(t, p.Invalid[0].Error(), "mkdocs.yml (document 1): apiVersion and kind are required")

	fns := map[string]*serverlessv1alpha2.Function{}
	for _, fn := range p.Functions {
		fns[fn.Namespace+"/"+fn.Name] = fn
	}
	require.Len(t, fns, 4)
	assert.Equal(t, "module.exports = { main: () => 'ok' }", fns["default/orders"].Spec.Source.Inline.Source)

	fulfil := fns["default/fulfil"]
	assert.Equal(t, "module.exports = { main: () => 'fulfilled' }", fulfil.Spec.Source.Inline.Source)
	assert.Equal(t, `{"name": "fulfil", "dependencies": {}}`, fulfil.Spec.Source.Inline.Dependencies)
	assert.True(t, fulfil.ScalesToZero())
	assert.Equal(t, []serverlessv1alpha2.EnvVar{{Name: "MODE", Value: "fast"}}, fulfil.Spec.Env)

	notify := fns["shop/notify"]
	assert.Equal(t, serverlessv1alpha2.Python312, notify.Spec.Runtime)
	assert.Empty(t, notify.Spec.Source.Inline.Dependencies)
	assert.Equal(t, "export function main() { return 1 }", fns["default/esm"].Spec.Source.Inline.Source)

	require.Len(t, p.Subscriptions, 1)
	sub := p.Subscriptions[0]
	assert.Equal(t, "fulfil", sub.Name)
	assert.Equal(t, "http://fulfil.default.svc.cluster.local", sub.Spec.Sink)
	assert.Equal(t, eventingv1alpha2.TypeMatchingStandard, sub.Spec.TypeMatching, "defaulted by the admitter")
	assert.Equal(t, map[string]eventingv1alpha2.ConfigValue{"maxInFlightMessages": "1"}, sub.Spec.Config)

	require.Len(t, p.Ignored, 1)
	assert.Equal(t, "Service", p.Ignored[0].Object.GetKind())
	assert.Contains(t, p.Files, filepath.Join(dir, "fulfil", "handler.js"))
	assert.Contains(t, p.Files, filepath.Join(dir, "fulfil", "package.json"))
	assert.NotContains(t, p.Files, filepath.Join(dir, "node_modules", "x.yaml"))

	assert.Equal(t, map[string]string{
		"default/orders": filepath.Join(dir, "manifests", "app.yaml"),
		"default/fulfil": filepath.Join(dir, "fulfil"),
		"shop/notify":    filepath.Join(dir, "notify"),
		"default/esm":    filepath.Join(dir, "esm"),
	}, p.Sources, "where each Function was written, for messages")
}

func TestLoadReportsBadFoldersAndKeepsTheRest(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"good/config.yaml":       "name: good\nruntime: python312\n",
		"good/handler.py":        "def main(e, c): return 1\n",
		"badruntime/config.yaml": "name: badruntime\nruntime: nodejs18\n",
		"badruntime/handler.js":  "module.exports = { main: () => 1 }",
		"typo/config.yaml":       "name: typo\nruntime: python312\nenviron: []\n",
		"typo/handler.py":        "def main(e, c): return 1\n",
		"nohandler/config.yaml":  "name: nohandler\nruntime: python312\n",
		"badsub/config.yaml":     "name: badsub\nruntime: python312\nsubscriptions: [{source: app, types: [order]}]\n",
		"badsub/handler.py":      "def main(e, c): return 1\n",
	})
	p := load(t, dir)
	require.Len(t, p.Functions, 2, "good and badsub's Function run")
	var msgs []string
	for _, err := range p.Invalid {
		msgs = append(msgs, err.Error())
	}
	require.Len(t, msgs, 4, "%v", msgs)
	joined := ""
	for _, m := range msgs {
		joined += m + "\n"
	}
	assert.Contains(t, joined, filepath.Join("badruntime", "config.yaml")+` (document 1): Function "badruntime" is invalid:`)
	assert.Contains(t, joined, `spec.runtime: Unsupported value: "nodejs18"`)
	assert.Contains(t, joined, filepath.Join("typo", "config.yaml")+`: error unmarshaling JSON: while decoding JSON: json: unknown field "environ"`)
	assert.Contains(t, joined, filepath.Join("nohandler", "config.yaml")+": read the handler:")
	assert.Contains(t, joined, filepath.Join("badsub", "config.yaml")+` (document 2): Subscription "badsub" is invalid: spec.types`)
}

func TestLoadFailsOnlyForAMissingDirectory(t *testing.T) {
	a, err := manifest.NewAdmitter()
	require.NoError(t, err)
	_, err = project.Load(context.Background(), filepath.Join(t.TempDir(), "missing"), a)
	require.Error(t, err)
	f := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(f, nil, 0o644))
	_, err = project.Load(context.Background(), f, a)
	assert.ErrorContains(t, err, "is not a directory")
}

func TestIsFolderConfig(t *testing.T) {
	assert.True(t, project.IsFolderConfig([]byte("name: x\nruntime: python312\n")))
	assert.False(t, project.IsFolderConfig([]byte("apiVersion: v1\nkind: ConfigMap\nruntime: x\n")))
	assert.False(t, project.IsFolderConfig([]byte("name: x\n")))
	assert.False(t, project.IsFolderConfig([]byte("[broken")))
}

// TestExampleShopLoads keeps examples/shop, what `make dev` runs, valid.
func TestExampleShopLoads(t *testing.T) {
	p := load(t, filepath.Join("..", "..", "examples", "shop"))
	require.Empty(t, p.Invalid)
	names := map[string]bool{}
	for _, fn := range p.Functions {
		names[fn.Name] = true
		// The first screen of `make dev` shows no deprecation warning:
		// the example runs the runtimes Kyma recommends.
		assert.False(t, fn.Spec.Runtime.Deprecated(), "%s runs %s, which Kyma deprecates", fn.Name, fn.Spec.Runtime)
	}
	assert.Equal(t, map[string]bool{"orders": true, "fulfil": true, "notify": true}, names)
	require.Len(t, p.Subscriptions, 2)
}

// TestKeepFromCarriesOverWhatABrokenFileDefined: an edit saved
// half-written (an empty handler), a config.yaml with a mistake, or a
// manifest with one bad document reports the error and leaves the objects
// that file defined as they were; what a readable file no longer defines
// is gone.
func TestKeepFromCarriesOverWhatABrokenFileDefined(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"orders/config.yaml": "name: orders\nruntime: nodejs22\nsubscriptions: [{source: shop, types: [order.created.v1]}]\n",
		"orders/handler.js":  "module.exports = { main: () => 'v1' }\n",
		"app.yaml": `apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata: {name: a}
spec: {runtime: nodejs22, source: {inline: {source: "module.exports = { main: () => 'a' }"}}}
---
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata: {name: b}
spec: {runtime: nodejs22, source: {inline: {source: "module.exports = { main: () => 'b' }"}}}
---
apiVersion: gateway.kyma-project.io/v2
kind: APIRule
metadata: {name: b}
spec: {hosts: [b], service: {name: b, port: 80}, rules: [{path: /*, methods: [GET], noAuth: true}]}
`,
		"gone/config.yaml": "name: gone\nruntime: python312\n",
		"gone/handler.py":  "def main(event, context):\n    return 'x'\n",
	})
	names := func(p *project.Project) []string {
		var out []string
		for _, fn := range p.Functions {
			out = append(out, fn.Name+"="+fn.Spec.Source.Inline.Source)
		}
		for _, s := range p.Subscriptions {
			out = append(out, "sub:"+s.Name)
		}
		for _, r := range p.APIRules {
			out = append(out, "apirule:"+r.Name)
		}
		return out
	}
	before := load(t, dir)
	require.Empty(t, before.Invalid)
	require.Empty(t, before.Broken)
	const (
		orders = "orders=module.exports = { main: () => 'v1' }\n"
		a      = "a=module.exports = { main: () => 'a' }"
		b      = "b=module.exports = { main: () => 'b' }"
		gone   = "gone=def main(event, context):\n    return 'x'\n"
	)
	require.ElementsMatch(t, []string{orders, a, b, gone, "sub:orders", "apirule:b"}, names(before))

	t.Run("a handler saved half-written", func(t *testing.T) {
		write(t, dir, map[string]string{"orders/handler.js": ""})
		p := load(t, dir)
		require.NotEmpty(t, p.Invalid, "the empty source is reported")
		p.KeepFrom(before)
		// Exactly these: orders' last version and its Subscription, which
		// keeps delivering, once each beside the rest.
		assert.ElementsMatch(t, []string{orders, a, b, gone, "sub:orders", "apirule:b"}, names(p))
		assert.Equal(t, filepath.Join(dir, "orders"), p.Sources["default/orders"])
		write(t, dir, map[string]string{"orders/handler.js": "module.exports = { main: () => 'v1' }\n"})
	})
	t.Run("a config.yaml with a mistake", func(t *testing.T) {
		write(t, dir, map[string]string{"orders/config.yaml": "name: orders\nruntime: nodejs22\nsubscriptions: [\n"})
		p := load(t, dir)
		require.NotEmpty(t, p.Invalid)
		p.KeepFrom(before)
		assert.ElementsMatch(t, []string{orders, a, b, gone, "sub:orders", "apirule:b"}, names(p))
		write(t, dir, map[string]string{"orders/config.yaml": "name: orders\nruntime: nodejs22\nsubscriptions: [{source: shop, types: [order.created.v1]}]\n"})
	})
	t.Run("one bad document of a manifest", func(t *testing.T) {
		write(t, dir, map[string]string{"app.yaml": `apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata: {name: a}
spec: {runtime: nodejs22, source: {inline: {source: "module.exports = { main: () => 'a2' }"}}}
---
apiVersion: serverless.kyma-project.io/v1alpha2
kind: Function
metadata: {name: b}
spec: {runtime: nodejs18, source: {inline: {source: "module.exports = { main: () => 'b2' }"}}}
`})
		p := load(t, dir)
		require.Len(t, p.Invalid, 1)
		p.KeepFrom(before)
		// One Function per name: the good document's new version (not
		// beside its old one), the bad one's last version.
		assert.ElementsMatch(t, []string{orders, "a=module.exports = { main: () => 'a2' }", b, gone, "sub:orders", "apirule:b"}, names(p))
	})
	t.Run("a manifest saved half-written", func(t *testing.T) {
		app, err := os.ReadFile(filepath.Join(dir, "app.yaml"))
		require.NoError(t, err)
		write(t, dir, map[string]string{"app.yaml": "apiVersion: gateway.kyma-project.io/v2\nkind: [\n"})
		p := load(t, dir)
		require.NotEmpty(t, p.Invalid)
		p.KeepFrom(before)
		assert.ElementsMatch(t, []string{orders, a, b, gone, "sub:orders", "apirule:b"}, names(p), "the APIRule keeps serving its host too")
		write(t, dir, map[string]string{"app.yaml": string(app)})
	})
	t.Run("a manifest saved empty", func(t *testing.T) {
		// An editor that truncates a file before writing it can be read
		// between the two: the empty file keeps what it defined, and says
		// so once it does keep something.
		app, err := os.ReadFile(filepath.Join(dir, "app.yaml"))
		require.NoError(t, err)
		config, err := os.ReadFile(filepath.Join(dir, "orders", "config.yaml"))
		require.NoError(t, err)
		write(t, dir, map[string]string{"app.yaml": "", "orders/config.yaml": "", "new.yaml": ""})
		p := load(t, dir)
		require.Empty(t, p.Invalid, "an empty file is no mistake of its own")
		p.KeepFrom(before)
		assert.ElementsMatch(t, []string{orders, a, b, gone, "sub:orders", "apirule:b"}, names(p))
		var msgs []string
		for _, err := range p.Invalid {
			msgs = append(msgs, err.Error())
		}
		assert.Equal(t, []string{
			filepath.Join(dir, "app.yaml") + ": the file is empty (still being saved?): APIRule default/b, Function default/a, Function default/b kept as defined before; remove the file to remove them",
			filepath.Join(dir, "orders", "config.yaml") + ": the file is empty (still being saved?): Function default/orders, Subscription default/orders kept as defined before; remove the file to remove them",
		}, msgs, "new.yaml defined nothing and is not reported")
		write(t, dir, map[string]string{"app.yaml": string(app), "orders/config.yaml": string(config)})
		require.NoError(t, os.Remove(filepath.Join(dir, "new.yaml")))
	})
	t.Run("a removed folder is gone", func(t *testing.T) {
		require.NoError(t, os.RemoveAll(filepath.Join(dir, "gone")))
		p := load(t, dir)
		p.KeepFrom(before)
		assert.ElementsMatch(t, []string{orders, "a=module.exports = { main: () => 'a2' }", b, "sub:orders", "apirule:b"}, names(p),
			"gone is gone; b, still broken in app.yaml, keeps its last version")
	})
}
