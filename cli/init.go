package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"

	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/local/project"
)

func newInitCommand() *cobra.Command {
	var (
		runtime   string
		dir       string
		namespace string
	)
	cmd := &cobra.Command{
		Use:   "init NAME",
		Short: "Write a new function folder (config.yaml, handler, dependencies) with a Subscription example",
		Long: `init writes a Kyma-CLI-style function folder: config.yaml (the Function and a
Subscription that delivers 'NAME.requested.v1' events from source 'kfn' to it),
the handler and an empty dependencies file. 'kfn dev' runs the folder as it is.`,
		Example: `  kfn init --runtime nodejs24 orders
  kfn init --runtime python312 --dir functions/notify notify`,
		Args: exactArgs(1, "the function's NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			// A path names the folder to write; the function is named
			// after its last element.
			if strings.ContainsRune(name, filepath.Separator) {
				if dir == "" {
					dir = filepath.Clean(name)
				}
				name = filepath.Base(filepath.Clean(name))
			}
			if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
				return usagef("function name %q: use lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters", name)
			}
			rt := serverlessv1alpha2.Runtime(runtime)
			if !slices.Contains(serverlessv1alpha2.Runtimes, rt) {
				return usagef("runtime %q: use one of %v", runtime, serverlessv1alpha2.Runtimes)
			}
			if dir == "" {
				dir = name
			}
			files := initFiles(name, namespace, rt)
			if err := writeNew(dir, files); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Wrote %s function %q in %s:\n", rt, name, dir)
			for _, f := range sortedKeys(files) {
				fmt.Fprintf(out, "  %s\n", filepath.Join(dir, f))
			}
			fmt.Fprintf(out, "Run it with: kfn dev %s\n", filepath.Clean(dir))
			return nil
		},
	}
	cmd.Flags().StringVar(&runtime, "runtime", string(serverlessv1alpha2.NodeJS24), fmt.Sprintf("runtime of the function, one of %v", serverlessv1alpha2.Runtimes))
	_ = cmd.RegisterFlagCompletionFunc("runtime", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		out := make([]string, len(serverlessv1alpha2.Runtimes))
		for i, r := range serverlessv1alpha2.Runtimes {
			out[i] = string(r)
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	})
	cmd.Flags().StringVar(&dir, "dir", "", "folder to write (default ./NAME); it must not exist or be empty")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace of the function")
	return cmd
}

func initFiles(name, namespace string, rt serverlessv1alpha2.Runtime) map[string]string {
	config := string(project.NewConfig(name, namespace, rt))
	handler, deps := project.DefaultFiles(rt)
	switch rt {
	case serverlessv1alpha2.NodeJS26:
		return map[string]string{
			project.ConfigFile: config,
			handler: `const { getCloudEvent, getFunctionName } = require('sdk');

module.exports = {
  // Called for each HTTP request and each event, with Express's request and
  // response; answer through res.
  main: function (req, res) {
    const event = getCloudEvent(req);
    const data = (event ? event.data : req.body) || {};
    console.log(` + "`${getFunctionName()} got type=${event ? event.type : undefined} data=${JSON.stringify(data)}`" + `);
    res.json({ message: ` + "`${process.env.GREETING || 'Hello'} ${data.name || 'world'}`" + ` });
  },
};
`,
			deps: nodePackage(name),
		}
	case serverlessv1alpha2.Python314:
		return map[string]string{
			project.ConfigFile: config,
			handler: `import os

import flask

import sdk


def main():
    """Called for each HTTP request and each event; flask.request is the request."""
    event = sdk.get_cloud_event()
    data = (event.get_data() if event else flask.request.get_json(silent=True)) or {}
    name = data.get("name", "world") if isinstance(data, dict) else "world"
    print(f"{sdk.get_function_name()} got type={event.get_type() if event else None} data={data}")
    return {"message": f"{os.environ.get('GREETING', 'Hello')} {name}"}
`,
			deps: "",
		}
	}
	if rt.IsPython() {
		return map[string]string{
			project.ConfigFile: config,
			handler: `def main(event, context):
    """Called for each HTTP request and each event; returns the response body."""
    import os
    data = event.get("data") or {}
    name = data.get("name", "world") if isinstance(data, dict) else "world"
    print(f"{context['function-name']} got type={event.get('ce-type')} data={data}")
    return {"message": f"{os.environ.get('GREETING', 'Hello')} {name}"}
`,
			deps: "",
		}
	}
	return map[string]string{
		project.ConfigFile: config,
		handler: `module.exports = {
  // Called for each HTTP request and each event; the return value is the response body.
  main: async function (event, context) {
    const data = event.data || {};
    console.log(` + "`${context['function-name']} got type=${event['ce-type']} data=${JSON.stringify(data)}`" + `);
    return { message: ` + "`${process.env.GREETING || 'Hello'} ${data.name || 'world'}`" + ` };
  },
};
`,
		deps: nodePackage(name),
	}
}

func nodePackage(name string) string {
	return fmt.Sprintf(`{
  "name": %q,
  "version": "1.0.0",
  "dependencies": {}
}
`, name)
}

// writeNew writes files into dir, which must not exist or be empty; it
// writes nothing when it refuses.
func writeNew(dir string, files map[string]string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case err == nil && len(entries) > 0:
		return fmt.Errorf("%s is not empty: choose another --dir or name", dir)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("read %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	for _, name := range sortedKeys(files) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(files[name]), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
