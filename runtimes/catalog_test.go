package runtimes_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/runtimes"
)

func TestLookup(t *testing.T) {
	tests := map[string]struct {
		name       string
		language   runtimes.Language
		api        runtimes.HandlerAPI
		deprecated bool
		wantErr    bool
	}{
		"nodejs20 is deprecated":  {name: "nodejs20", language: runtimes.NodeJS, deprecated: true, api: runtimes.EventAPI},
		"nodejs22 is deprecated":  {name: "nodejs22", language: runtimes.NodeJS, deprecated: true, api: runtimes.EventAPI},
		"nodejs24":                {name: "nodejs24", language: runtimes.NodeJS, api: runtimes.EventAPI},
		"nodejs26":                {name: "nodejs26", language: runtimes.NodeJS, api: runtimes.RequestAPI},
		"python312 is deprecated": {name: "python312", language: runtimes.Python, deprecated: true, api: runtimes.EventAPI},
		"python314":               {name: "python314", language: runtimes.Python, api: runtimes.RequestAPI},
		"python39 is gone":        {name: "python39", wantErr: true},
		"empty":                   {name: "", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rt, err := runtimes.Lookup(tc.name)
			if tc.wantErr {
				require.Error(t, err)
				assert.True(t, errors.Is(err, runtimes.ErrUnknownRuntime), err)
				assert.Contains(t, err.Error(), "nodejs22", "the error lists the known runtimes")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.name, rt.Name)
			assert.Equal(t, tc.language, rt.Language)
			assert.Equal(t, tc.deprecated, rt.Deprecated)
			assert.Equal(t, tc.api, rt.API)
		})
	}
}

func TestAllIsACopy(t *testing.T) {
	all := runtimes.All()
	require.Len(t, all, 6)
	all[0].Name = "changed"
	assert.Equal(t, "nodejs20", runtimes.All()[0].Name)
}

func TestCommand(t *testing.T) {
	tests := map[string]struct {
		runtime string
		want    []string
	}{
		"nodejs": {"nodejs22", []string{"node", "/opt/kfn/nodejs/server.cjs"}},
		"python": {"python312", []string{"python3", "-u", "/opt/kfn/python/kfn_main.py"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, lookup(t, tc.runtime).Command(runtimes.ImageHostDir))
		})
	}
}

func TestDepsLayout(t *testing.T) {
	node, py := lookup(t, "nodejs24"), lookup(t, "python312")
	assert.Equal(t, "/d/node_modules", node.DepsLibDir("/d"))
	assert.Equal(t, "/d/site-packages", py.DepsLibDir("/d"))
	assert.Equal(t, "package.json", node.DepsFile())
	assert.Equal(t, "requirements.txt", py.DepsFile())
	assert.Equal(t, "handler.js", node.SourceFile())
	assert.Equal(t, "handler.py", py.SourceFile())
}

func TestFunctionDir(t *testing.T) {
	tests := map[string]string{
		"nodejs22":  runtimes.PodFunctionDir,
		"nodejs26":  runtimes.PodFunctionDir,
		"python312": runtimes.PodPythonFunctionDir, // Kyma's /kubeless
		"python314": runtimes.PodFunctionDir,       // Kyma moves python314 next to Node.js
	}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, want, lookup(t, name).FunctionDir())
		})
	}
}

// TestImageEnvIsTheImagesEnv: what kfn dev gives a host as its image's
// environment (ImageEnv) is what the runtime's Dockerfile sets.
func TestImageEnvIsTheImagesEnv(t *testing.T) {
	for _, rt := range runtimes.All() {
		dockerfile, err := os.ReadFile(filepath.Join(string(rt.Language), "Dockerfile"))
		require.NoError(t, err)
		for _, e := range rt.ImageEnv() {
			assert.Regexp(t, `(?m)^(ENV |    )`+regexp.QuoteMeta(e.Name+"="+e.Value)+`( \\)?$`, string(dockerfile),
				"%s: the image sets %s=%q", rt.Name, e.Name, e.Value)
		}
	}
}
