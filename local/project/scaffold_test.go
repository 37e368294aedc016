package project_test

import (
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/local/project"
)

// The config.yaml 'kfn init' writes is read back by the loader, strictly
// and admitted, for every runtime: the two cannot drift apart.
func TestFolderConfigLoadsForEveryRuntime(t *testing.T) {
	for _, rt := range serverlessv1alpha2.Runtimes {
		t.Run(string(rt), func(t *testing.T) {
			dir := t.TempDir()
			handler, deps := project.DefaultFiles(rt)
			files, err := project.FolderScaffold.Files("greet", "shop", rt)
			require.NoError(t, err)
			write(t, dir, map[string]string{
				"greet/" + project.ConfigFile: files[project.ConfigFile],
				"greet/" + handler:            "the handler",
				"greet/" + deps:               "the dependencies",
			})
			p := load(t, dir)
			require.Empty(t, p.Invalid)
			require.Len(t, p.Functions, 1)
			fn := p.Functions[0]
			assert.Equal(t, "shop", fn.Namespace)
			assert.Equal(t, "greet", fn.Name)
			assert.Equal(t, rt, fn.Spec.Runtime)
			assert.Equal(t, "the handler", fn.Spec.Source.Inline.Source)
			assert.Equal(t, "the dependencies", fn.Spec.Source.Inline.Dependencies)
			assert.True(t, fn.ScalesToZero())
			assert.Equal(t, []serverlessv1alpha2.EnvVar{{Name: "GREETING", Value: "Hello"}}, fn.Spec.Env)
			require.Len(t, p.Subscriptions, 1)
			sub := p.Subscriptions[0]
			assert.Equal(t, "http://greet.shop.svc.cluster.local", sub.Spec.Sink)
			assert.Equal(t, "kfn", sub.Spec.Source)
			assert.Equal(t, []string{"greet.requested.v1"}, sub.Spec.Types)
			assert.Equal(t, filepath.Join(dir, "greet"), p.Sources["shop/greet"])
		})
	}
}

func TestDefaultFiles(t *testing.T) {
	h, d := project.DefaultFiles(serverlessv1alpha2.NodeJS22)
	assert.Equal(t, []string{"handler.js", "package.json"}, []string{h, d})
	h, d = project.DefaultFiles(serverlessv1alpha2.Python314)
	assert.Equal(t, []string{"handler.py", "requirements.txt"}, []string{h, d})
}

// Each scaffold writes a handler and its dependencies under the names a
// folder has by default, for every runtime; a folder also its config.yaml.
func TestScaffoldsWriteTheDefaultFiles(t *testing.T) {
	for _, rt := range serverlessv1alpha2.Runtimes {
		handler, deps := project.DefaultFiles(rt)
		for s, want := range map[project.Scaffold][]string{
			project.KymaScaffold:   {deps, handler},
			project.FolderScaffold: {project.ConfigFile, deps, handler},
		} {
			files, err := s.Files("greet", "shop", rt)
			require.NoError(t, err)
			assert.ElementsMatch(t, want, slices.Collect(maps.Keys(files)), "%s %s", s, rt)
			assert.NotEmpty(t, files[handler])
		}
	}
}
