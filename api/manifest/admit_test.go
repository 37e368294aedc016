package manifest_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/api/manifest"
	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
)

// invalidCases and notReadyCases are the numbers of manifests in
// ../testdata/invalid and ../testdata/not-ready (package api's tests count
// them too): the tests check that they read every one, so a lost case or a
// narrowed pattern fails instead of quietly testing less. A new case
// raises them.
const (
	invalidCases  = 77
	notReadyCases = 17
)

func loadDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "testdata", dir, "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	entries, err := os.ReadDir(filepath.Join("..", "testdata", dir))
	require.NoError(t, err)
	require.Equal(t, len(entries), len(files), "every file in testdata/%s is a .yaml case", dir)
	out := map[string][]byte{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		out[filepath.Base(f)] = data
	}
	return out
}

// wants returns the "# want: " lines at the top of a test manifest.
func wants(data []byte) []string {
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if w, ok := strings.CutPrefix(line, "# want: "); ok {
			out = append(out, w)
		}
	}
	return out
}

func TestAdmitAcceptsValidManifests(t *testing.T) {
	a, err := manifest.NewAdmitter()
	require.NoError(t, err)
	for name, data := range loadDir(t, "valid") {
		t.Run(name, func(t *testing.T) {
			docs, err := manifest.Decode(name, data)
			require.NoError(t, err)
			require.Len(t, docs, 1)
			set := a.Load(context.Background(), docs)
			require.Empty(t, set.Invalid)
			require.Equal(t, 1, len(set.Functions)+len(set.Subscriptions)+len(set.APIRules))
			for _, fn := range set.Functions {
				assert.NotNil(t, fn.Spec.Replicas, "spec.replicas is defaulted")
				assert.NotEmpty(t, fn.Namespace, "a namespace is set as kubectl would")
			}
			for _, sub := range set.Subscriptions {
				assert.NotEmpty(t, sub.Spec.TypeMatching, "spec.typeMatching is defaulted")
			}
			for _, rule := range set.APIRules {
				assert.Equal(t, "gateway.kyma-project.io/v2", rule.APIVersion, "v2alpha1 is read as v2")
				assert.NotEmpty(t, rule.Spec.Rules)
			}
		})
	}
}

func TestAdmitRefusesInvalidManifests(t *testing.T) {
	a, err := manifest.NewAdmitter()
	require.NoError(t, err)
	files := loadDir(t, "invalid")
	require.Equal(t, invalidCases, len(files), "cases in testdata/invalid")
	for name, data := range files {
		t.Run(name, func(t *testing.T) {
			want := wants(data)
			require.NotEmpty(t, want, "a refused manifest must say which message it expects")
			docs, err := manifest.Decode(name, data)
			require.NoError(t, err)
			set := a.Load(context.Background(), docs)
			require.Empty(t, set.Functions, "nothing of a refused manifest may be admitted")
			require.Empty(t, set.Subscriptions)
			require.Empty(t, set.APIRules)
			require.Len(t, set.Invalid, 1)
			msg := set.Invalid[0].Error()
			assert.Contains(t, msg, name+" (document 1)")
			for _, w := range want {
				assert.Contains(t, msg, w)
			}
		})
	}
}

// TestAdmitAcceptsNotReadyManifests checks the Functions Kyma accepts and
// only reports as not ready: admitted offline as by the API server, with
// the problems the controller reports (and kfn dev shows) in Kyma's form.
func TestAdmitAcceptsNotReadyManifests(t *testing.T) {
	a, err := manifest.NewAdmitter()
	require.NoError(t, err)
	files := loadDir(t, "not-ready")
	require.Equal(t, notReadyCases, len(files), "cases in testdata/not-ready")
	for name, data := range files {
		t.Run(name, func(t *testing.T) {
			want := wants(data)
			require.NotEmpty(t, want, "a not-ready manifest must say which problems it expects")
			docs, err := manifest.Decode(name, data)
			require.NoError(t, err)
			set := a.Load(context.Background(), docs)
			require.Empty(t, set.Invalid, "Kyma accepts this manifest")
			require.Len(t, set.Functions, 1)
			assert.Equal(t, want, set.Functions[0].Validate())
			assert.Equal(t, strings.Join(want, ". "), serverlessv1alpha2.InvalidSpecMessage(set.Functions[0].Validate()))
		})
	}
}

func TestValidManifestsHaveNoProblems(t *testing.T) {
	a, err := manifest.NewAdmitter()
	require.NoError(t, err)
	for name, data := range loadDir(t, "valid") {
		docs, err := manifest.Decode(name, data)
		require.NoError(t, err)
		for _, fn := range a.Load(context.Background(), docs).Functions {
			assert.Empty(t, fn.Validate(), name)
		}
	}
}
