package runtimes_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/runtimes"
)

// standbySources are Functions a standby host of each contract loads: they
// answer with a variable of the environment the specialize request set and
// the name the host gave them.
var standbySources = map[string]map[string]string{
	"nodejs22":  {"handler.js": `module.exports = { main: (event, context) => process.env.GREETING + ' from ' + context.namespace + '/' + context['function-name'] };`},
	"python312": {"handler.py": "import os\n\ndef main(event, context):\n    return os.environ['GREETING'] + ' from ' + context['namespace'] + '/' + context['function-name']\n"},
	"nodejs26":  {"handler.js": `module.exports = { main: (req, res) => res.send(process.env.GREETING + ' from ' + process.env.SERVICE_NAMESPACE + '/' + process.env.FUNC_NAME) };`},
	"python314": {"handler.py": "import os\n\ndef main():\n    return os.environ['GREETING'] + ' from ' + os.environ['SERVICE_NAMESPACE'] + '/' + os.environ['FUNC_NAME']\n"},
}

// TestStandbyHostServesTheFunctionItIsGiven: a host started with a standby
// token hash serves no Function (health "standby" without a Function's
// name, readiness 503, every call 503) and refuses a specialize request
// without the token, or with a body it cannot take (each refusal leaves it
// on standby); with the token and a Function's files and environment, it
// loads that Function, names it on health answers and serves it, and from
// then on a second specialize request is the Function's own request: a
// standby host never serves a second Function. Fails when the token is not
// checked, a refused request changes the host, or a second request
// replaces the Function.
func TestStandbyHostServesTheFunctionItIsGiven(t *testing.T) {
	for _, name := range []string{"nodejs22", "python312", "nodejs26", "python314"} {
		rt := lookup(t, name)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const token = "a-standby-token-only-the-pool-knows"
			opts := hostOptions{noWait: true, env: map[string]string{runtimes.EnvStandbyTokenSHA256: runtimes.StandbyTokenHash(token)}}
			if rt.API == runtimes.RequestAPI && rt.Language == runtimes.Python {
				opts.interpreter = flaskPython(t, name)
			}
			h := startHost(t, rt, t.TempDir(), opts)
			h.waitServing(15 * time.Second)

			onStandby := func(when string) {
				t.Helper()
				r := h.mustDo("GET", runtimes.HealthPath, nil, "")
				assert.Equal(t, http.StatusOK, r.status, when)
				assert.Equal(t, "standby", r.body, when)
				assert.Empty(t, r.header.Get("X-Kfn-Function"), "%s: a standby host names no Function", when)
				assert.Equal(t, http.StatusServiceUnavailable, h.mustDo("GET", runtimes.ReadyPath, nil, "").status, "%s: not ready", when)
				r = h.mustDo("POST", "/", nil, "{}")
				assert.Equal(t, http.StatusServiceUnavailable, r.status, "%s: calls wait for a Function", when)
			}
			onStandby("at start")

			good := runtimes.Specialization{
				Env:   map[string]string{runtimes.EnvFunctionName: "orders", runtimes.EnvNamespace: "shop", "GREETING": "hello"},
				Files: standbySources[name],
			}
			body := func(s any) string {
				b, err := json.Marshal(s)
				require.NoError(t, err)
				return string(b)
			}
			bearer := map[string]string{"Authorization": "Bearer " + token}
			for _, c := range []struct {
				what   string
				header map[string]string
				body   string
				status int
			}{
				{"no token", nil, body(good), http.StatusUnauthorized},
				{"another token", map[string]string{"Authorization": "Bearer " + token + "x"}, body(good), http.StatusUnauthorized},
				{"the hash as the token", map[string]string{"Authorization": "Bearer " + runtimes.StandbyTokenHash(token)}, body(good), http.StatusUnauthorized},
				{"not JSON", bearer, "{", http.StatusBadRequest},
				{"an array", bearer, "[]", http.StatusBadRequest},
				{"an unknown field", bearer, `{"files": {"handler.js": ""}, "image": "x"}`, http.StatusBadRequest},
				{"no files", bearer, `{"env": {"A": "b"}}`, http.StatusBadRequest},
				{"a path out of the directory", bearer, `{"files": {"../handler.js": "x"}}`, http.StatusBadRequest},
				{"a path into a directory", bearer, `{"files": {"lib/handler.js": "x"}}`, http.StatusBadRequest},
				{"a hidden file", bearer, `{"files": {".npmrc": "x"}}`, http.StatusBadRequest},
				{"a file that is not text", bearer, `{"files": {"handler.js": 1}}`, http.StatusBadRequest},
				{"the port", bearer, `{"env": {"FUNC_PORT": "9"}, "files": {"handler.js": "x"}}`, http.StatusBadRequest},
				{"the token's hash", bearer, `{"env": {"KFN_STANDBY_TOKEN_SHA256": ""}, "files": {"handler.js": "x"}}`, http.StatusBadRequest},
				{"a variable name with a space", bearer, `{"env": {"A B": "c"}, "files": {"handler.js": "x"}}`, http.StatusBadRequest},
				{"a value with NUL", bearer, `{"env": {"A": "\u0000"}, "files": {"handler.js": "x"}}`, http.StatusBadRequest},
				{"a timeout the host refuses", bearer, `{"env": {"FUNC_TIMEOUT": "-1"}, "files": {"handler.js": "x"}}`, http.StatusBadRequest},
				{"too many files", bearer, body(runtimes.Specialization{Files: manyFiles(65)}), http.StatusBadRequest},
				{"too large", bearer, body(runtimes.Specialization{Files: map[string]string{"handler.js": strings.Repeat("x", runtimes.MaxSpecializeBytes)}}), http.StatusRequestEntityTooLarge},
			} {
				r := h.mustDo("POST", runtimes.SpecializePath, c.header, c.body)
				assert.Equal(t, c.status, r.status, "%s: %s", c.what, r.body)
				if c.status == http.StatusUnauthorized {
					assert.Equal(t, "Bearer", r.header.Get("WWW-Authenticate"), c.what)
				}
				onStandby("after " + c.what)
			}

			// Loaded: served, named, and for good.
			r := h.mustDo("POST", runtimes.SpecializePath, bearer, body(good))
			require.Equal(t, http.StatusOK, r.status, "%s\n%s", r.body, h.out)
			assert.Equal(t, "shop/orders", r.header.Get("X-Kfn-Function"))
			r = h.mustDo("GET", runtimes.ReadyPath, nil, "")
			assert.Equal(t, http.StatusOK, r.status)
			assert.Equal(t, "shop/orders", r.header.Get("X-Kfn-Function"), "the early ready probe sees whose pod it is")
			assert.Equal(t, "hello from shop/orders", h.mustDo("GET", "/", nil, "").body)

			second := good
			second.Env = map[string]string{runtimes.EnvFunctionName: "thief", runtimes.EnvNamespace: "other", "GREETING": "stolen"}
			r = h.mustDo("POST", runtimes.SpecializePath, bearer, body(second))
			assert.Equal(t, "hello from shop/orders", r.body, "the Function's own request, not a second Function")
			assert.Equal(t, "hello from shop/orders", h.mustDo("GET", "/", nil, "").body)
			assert.Equal(t, "shop/orders", h.mustDo("GET", runtimes.HealthPath, nil, "").header.Get("X-Kfn-Function"))
		})
	}
}

// slowSources are Functions whose module takes a while to load (a timer
// awaited at the top of an ES module, a sleep at import), so that
// specialize requests sent at once overlap the load.
var slowSources = map[string]map[string]string{
	"nodejs22":  {"handler.mjs": "await new Promise((resolve) => setTimeout(resolve, 300));\nexport function main(event, context) { return process.env.GREETING + ' from ' + context.namespace + '/' + context['function-name']; }\n"},
	"python312": {"handler.py": "import os\nimport time\n\ntime.sleep(0.3)\n\ndef main(event, context):\n    return os.environ['GREETING'] + ' from ' + context['namespace'] + '/' + context['function-name']\n"},
}

// TestStandbyHostLoadsOneFunctionAtATime: specialize requests sent at once
// load one Function; the others are refused (409) or, once it is loaded,
// are its own requests. Fails when two loads run at once.
func TestStandbyHostLoadsOneFunctionAtATime(t *testing.T) {
	for _, rt := range testRuntimes(t) {
		t.Run(rt.Name, func(t *testing.T) {
			t.Parallel()
			const token = "another-standby-token-of-the-pool"
			h := startHost(t, rt, t.TempDir(), hostOptions{noWait: true, env: map[string]string{runtimes.EnvStandbyTokenSHA256: runtimes.StandbyTokenHash(token)}})
			h.waitServing(15 * time.Second)
			bearer := map[string]string{"Authorization": "Bearer " + token}
			var wg sync.WaitGroup
			results := make([]response, 8)
			for i := range results {
				wg.Add(1)
				go func() {
					defer wg.Done()
					b, _ := json.Marshal(runtimes.Specialization{
						Env:   map[string]string{runtimes.EnvFunctionName: "f" + strconv.Itoa(i), runtimes.EnvNamespace: "shop", "GREETING": "hello"},
						Files: slowSources[rt.Name],
					})
					r, err := h.do("POST", runtimes.SpecializePath, bearer, strings.NewReader(string(b)))
					assert.NoError(t, err)
					results[i] = r
				}()
			}
			wg.Wait()
			loaded := ""
			for _, r := range results {
				switch {
				case r.status == http.StatusOK && strings.HasPrefix(r.body, "loaded "):
					assert.Empty(t, loaded, "two Functions loaded: %s and %s", loaded, r.body)
					loaded = strings.TrimPrefix(r.body, "loaded ")
				case r.status == http.StatusConflict, r.status == http.StatusOK && strings.HasPrefix(r.body, "hello from "):
				default:
					t.Errorf("unexpected answer %d %q", r.status, r.body)
				}
			}
			require.NotEmpty(t, loaded, "one specialize request loaded its Function")
			assert.Equal(t, "hello from "+loaded, h.mustDo("GET", "/", nil, "").body)
		})
	}
}

func manyFiles(n int) map[string]string {
	m := map[string]string{}
	for i := range n {
		m["f"+strconv.Itoa(i)+".js"] = ""
	}
	return m
}
