package cli

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/local/project"
)

// The Kyma CLI's function commands (kyma function init|create|get|delete|
// explain, CLI 3), with its arguments, flags and answers, against a
// cluster or a kfn dev.

// Versions of the runtimes of each language, as Kyma's CLI takes them
// (-v/--version), and the default of each: the newest Kyma does not
// deprecate (python312 is deprecated, so Python's is 3.14, Kyma's newer
// handler API).
var (
	nodeVersions   = []string{"20", "22", "24", "26"}
	pythonVersions = []string{"3.12", "3.14"}
)

const (
	defaultNodeVersion   = "24"
	defaultPythonVersion = "3.14"
	// defaultDevWait bounds how long create and delete wait for kfn dev
	// to show the change (it reads the project every half second, and
	// installs dependencies before it shows a new function).
	defaultDevWait = 30 * time.Second
)

// runtimeOf returns the runtime of language ("nodejs", "python") at
// version, or a usage error naming the versions.
func runtimeOf(language, version string) (serverlessv1alpha2.Runtime, error) {
	versions := nodeVersions
	if language == "python" {
		versions = pythonVersions
	}
	if !slices.Contains(versions, version) {
		return "", usagef("--version %q: %s has %s", version, language, strings.Join(versions, ", "))
	}
	return serverlessv1alpha2.Runtime(language + strings.ReplaceAll(version, ".", "")), nil
}

func newFunctionCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "function",
		Aliases: []string{"functions"},
		Short:   "The Kyma CLI's function commands: init, create, get, delete, explain",
		Long: `function has the Kyma CLI's function commands (kyma function ...), with its
arguments, flags and answers: init writes a handler and its dependencies,
create makes a Function of them, get lists Functions, delete removes one.
They work on the cluster of a kubeconfig (--kubeconfig, --context or the
KUBECONFIG variable) as Kyma's CLI does, or on a running kfn dev: there
create writes the Function's manifest into the project kfn dev runs
(--project, default the current directory) and delete removes it.`,
		Example: `  kfn function init python --dir ./hello
  kfn function create python hello --source ./hello/handler.py --dependencies ./hello/requirements.txt
  kfn function get
  kfn function delete hello`,
		Args: exactArgs(0, "a subcommand"),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newFunctionInitCommand(), newFunctionCreateCommand(), newFunctionGetCommand(),
		newFunctionDeleteCommand(), newFunctionExplainCommand())
	return cmd
}

// --- create

// createFlags are the flags of kyma function create.
type createFlags struct {
	target          targetFlags
	namespace       string
	imageOverride   string
	replicas        int32
	source, deps    string
	env, mounts     []string
	dryRun, istio   bool
	output, version string
	project         string
	wait            time.Duration
}

func newFunctionCreateCommand() *cobra.Command {
	mk := func(language string) *cobra.Command {
		f := &createFlags{}
		use, short := language+" NAME [flags]", "Create a "+language+" Function"
		if language == "" {
			use, short = "create NAME [flags]", "Create a Function with the default Node.js runtime (nodejs24); create python for Python"
		}
		cmd := &cobra.Command{
			Use:   use,
			Short: short,
			Args:  exactArgs(1, "the Function's NAME"),
			RunE: func(cmd *cobra.Command, args []string) error {
				rt := serverlessv1alpha2.NodeJS24
				if language != "" {
					var err error
					if rt, err = runtimeOf(language, f.version); err != nil {
						return err
					}
				}
				return f.run(cmd, args[0], rt)
			},
		}
		f.target.add(cmd)
		fs := cmd.Flags()
		fs.StringVar(&f.imageOverride, "runtime-image-override", "", "custom runtime image to run the Function on")
		fs.StringVarP(&f.namespace, "namespace", "n", "default", "the Function's namespace")
		fs.Int32Var(&f.replicas, "replicas", 1, "the Function's replicas")
		fs.StringVarP(&f.source, "source", "s", "", "file of the Function's source (default: a hello-world handler)")
		fs.StringVarP(&f.deps, "dependencies", "d", "", "file of the Function's dependencies (package.json, requirements.txt)")
		fs.StringArrayVar(&f.env, "env", nil, "an environment variable, KEY=VALUE; repeat for more")
		fs.StringArrayVar(&f.mounts, "secret-mount", nil, "a Secret mounted read-only, SECRET-NAME=MOUNT-PATH; repeat for more")
		fs.BoolVar(&f.dryRun, "dry-run", false, "check the Function (the API server's dry run; in kfn dev: print the manifest) without creating it")
		fs.StringVarP(&f.output, "output", "o", "", "print the Function as json or yaml")
		fs.BoolVar(&f.istio, "istio-injection", false, "annotate the Function sidecar.istio.io/inject with the value")
		fs.StringVar(&f.project, "project", ".", "in kfn dev: the project directory kfn dev runs, where the manifest is written")
		fs.DurationVar(&f.wait, "wait", defaultDevWait, "in kfn dev: how long to wait for kfn dev to show a new Function (0: do not wait)")
		switch language {
		case "nodejs":
			fs.StringVarP(&f.version, "version", "v", defaultNodeVersion, "Node.js version: "+strings.Join(nodeVersions, ", "))
		case "python":
			fs.StringVarP(&f.version, "version", "v", defaultPythonVersion, "Python version: "+strings.Join(pythonVersions, ", "))
		}
		return cmd
	}
	cmd := mk("")
	cmd.AddCommand(mk("nodejs"), mk("python"))
	return cmd
}

// checkKymaOutput refuses an -o other than Kyma's ("", json, yaml; and
// kfn's table).
func checkKymaOutput(output string) error {
	if output == "" || output == outputTable {
		return nil
	}
	return checkOutput(output)
}

func (f *createFlags) run(cmd *cobra.Command, name string, rt serverlessv1alpha2.Runtime) error {
	if err := checkKymaOutput(f.output); err != nil {
		return err
	}
	fn, err := f.function(cmd, name, rt)
	if err != nil {
		return err
	}
	if w := rt.DeprecationWarning(); w != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), strings.Replace(w, "Warning: function configured, runtime", "warning: runtime", 1))
	}
	u, err := toUnstructured(fn)
	if err != nil {
		return err
	}
	if f.target.inCluster(cmd) {
		c, err := f.target.cluster()
		if err != nil {
			return err
		}
		opts := []client.ApplyOption{client.FieldOwner(fieldManager), client.ForceOwnership}
		if f.dryRun {
			opts = append(opts, client.DryRunAll)
		}
		if err := c.client.Apply(cmd.Context(), client.ApplyConfigurationFromUnstructured(u), opts...); err != nil {
			return fmt.Errorf("create Function %s/%s in %s: %w", fn.Namespace, name, c.where, err)
		}
	} else if err := f.writeDev(cmd, fn, u); err != nil {
		return err
	}
	if f.output == outputJSON || f.output == outputYAML {
		return printObject(cmd.OutOrStdout(), f.output, u.Object)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "resource %s applied%s\n", name, dryRunSuffix(f.dryRun))
	return nil
}

func dryRunSuffix(dryRun bool) string {
	if dryRun {
		return " (dry run)"
	}
	return ""
}

// function makes the Function the flags describe, as Kyma's CLI does.
func (f *createFlags) function(cmd *cobra.Command, name string, rt serverlessv1alpha2.Runtime) (*serverlessv1alpha2.Function, error) {
	files, err := project.KymaScaffold.Files(name, f.namespace, rt)
	if err != nil {
		return nil, err
	}
	handlerFile, depsFile := project.DefaultFiles(rt)
	handler, deps := files[handlerFile], files[depsFile]
	for _, file := range []struct {
		flag string
		into *string
	}{{f.source, &handler}, {f.deps, &deps}} {
		if file.flag == "" {
			continue
		}
		data, err := os.ReadFile(file.flag)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", file.flag, err)
		}
		*file.into = string(data)
	}
	env, err := pairs("--env", f.env)
	if err != nil {
		return nil, err
	}
	mounts, err := pairs("--secret-mount", f.mounts)
	if err != nil {
		return nil, err
	}
	fn := &serverlessv1alpha2.Function{
		TypeMeta:   metav1.TypeMeta{APIVersion: serverlessv1alpha2.GroupVersion.String(), Kind: "Function"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.namespace},
		Spec: serverlessv1alpha2.FunctionSpec{
			Runtime:              rt,
			RuntimeImageOverride: f.imageOverride,
			Replicas:             &f.replicas,
			Source:               serverlessv1alpha2.Source{Inline: &serverlessv1alpha2.InlineSource{Source: handler, Dependencies: deps}},
		},
	}
	for _, kv := range env {
		fn.Spec.Env = append(fn.Spec.Env, serverlessv1alpha2.EnvVar{Name: kv[0], Value: kv[1]})
	}
	for _, kv := range mounts {
		fn.Spec.SecretMounts = append(fn.Spec.SecretMounts, serverlessv1alpha2.SecretMount{SecretName: kv[0], MountPath: kv[1]})
	}
	if cmd.Flags().Changed("istio-injection") {
		fn.Annotations = map[string]string{"sidecar.istio.io/inject": strconv.FormatBool(f.istio)}
	}
	return fn, nil
}

// pairs splits each KEY=VALUE of a flag, in order; a key given twice is
// refused, as Kyma's CLI refuses it.
func pairs(flag string, values []string) ([][2]string, error) {
	var out [][2]string
	seen := map[string]bool{}
	for _, v := range values {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return nil, usagef("%s %q: want KEY=VALUE", flag, v)
		}
		if seen[k] {
			return nil, usagef("%s: %s is given more than once", flag, k)
		}
		seen[k] = true
		out = append(out, [2]string{k, val})
	}
	return out, nil
}

func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("convert %T: %w", obj, err)
	}
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

// --- get

// functionRow is one Function as Kyma's CLI lists it.
type functionRow struct {
	namespace, name, configured, running, runtime, generation string
}

func newFunctionGetCommand() *cobra.Command {
	var (
		target        targetFlags
		namespace     string
		allNamespaces bool
		output        string
	)
	cmd := &cobra.Command{
		Use:   "get [NAME] [flags]",
		Short: "List Functions: name, configured, running, runtime, generation",
		Args:  atMostOneArg("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkKymaOutput(output); err != nil {
				return err
			}
			ns := namespace
			if allNamespaces {
				ns = ""
			}
			var rows []functionRow
			var err error
			if target.inCluster(cmd) {
				rows, err = clusterFunctionRows(cmd, &target, ns)
			} else {
				rows, err = devFunctionRows(cmd, &target, ns)
			}
			if err != nil {
				return err
			}
			if len(args) == 1 {
				rows = slices.DeleteFunc(rows, func(r functionRow) bool { return r.name != args[0] })
			}
			slices.SortStableFunc(rows, func(a, b functionRow) int {
				return strings.Compare(a.namespace+"/"+a.name, b.namespace+"/"+b.name)
			})
			return printFunctionRows(cmd.OutOrStdout(), output, rows, allNamespaces)
		},
	}
	target.add(cmd)
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "the Functions' namespace")
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "Functions of every namespace")
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml")
	return cmd
}

func clusterFunctionRows(cmd *cobra.Command, target *targetFlags, namespace string) ([]functionRow, error) {
	c, err := target.cluster()
	if err != nil {
		return nil, err
	}
	var list serverlessv1alpha2.FunctionList
	if err := c.client.List(cmd.Context(), &list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list Functions in %s: %w", c.where, err)
	}
	rows := make([]functionRow, 0, len(list.Items))
	for _, fn := range list.Items {
		rows = append(rows, functionRow{
			namespace: fn.Namespace, name: fn.Name, runtime: string(fn.Spec.Runtime), generation: strconv.FormatInt(fn.Generation, 10),
			configured: conditionStatus(&fn, serverlessv1alpha2.ConditionConfigurationReady),
			running:    conditionStatus(&fn, serverlessv1alpha2.ConditionRunning),
		})
	}
	return rows, nil
}

func conditionStatus(fn *serverlessv1alpha2.Function, t serverlessv1alpha2.ConditionType) string {
	if c := fn.Status.Condition(t); c != nil {
		return string(c.Status)
	}
	return ""
}

// printFunctionRows writes rows as Kyma's CLI does: a table (NAMESPACE
// first with -A), or a list of objects with the same keys.
func printFunctionRows(w io.Writer, output string, rows []functionRow, withNamespace bool) error {
	if output == outputJSON || output == outputYAML {
		list := make([]map[string]string, 0, len(rows))
		for _, r := range rows {
			m := map[string]string{"name": r.name, "configured": r.configured, "running": r.running, "runtime": r.runtime, "generation": r.generation}
			if withNamespace {
				m["namespace"] = r.namespace
			}
			list = append(list, m)
		}
		return printObject(w, output, list)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	header := "NAME\tCONFIGURED\tRUNNING\tRUNTIME\tGENERATION"
	if withNamespace {
		header = "NAMESPACE\t" + header
	}
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		line := strings.Join([]string{r.name, r.configured, r.running, r.runtime, r.generation}, "\t")
		if withNamespace {
			line = r.namespace + "\t" + line
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

// --- delete

func newFunctionDeleteCommand() *cobra.Command {
	var (
		target    targetFlags
		namespace string
		dryRun    bool
		dir       string
		wait      time.Duration
	)
	cmd := &cobra.Command{
		Use:   "delete NAME [flags]",
		Short: "Delete a Function",
		Args:  exactArgs(1, "the Function's NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if target.inCluster(cmd) {
				c, err := target.cluster()
				if err != nil {
					return err
				}
				fn := &serverlessv1alpha2.Function{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
				var opts []client.DeleteOption
				if dryRun {
					opts = append(opts, client.DryRunAll)
				}
				if err := c.client.Delete(cmd.Context(), fn, opts...); err != nil {
					if apierrors.IsNotFound(err) {
						return fmt.Errorf("delete Function %s/%s: there is none in %s", namespace, name, c.where)
					}
					return fmt.Errorf("delete Function %s/%s in %s: %w", namespace, name, c.where, err)
				}
			} else if err := deleteDev(cmd, &target, dir, namespace, name, dryRun, wait); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "resource %s deleted%s\n", name, dryRunSuffix(dryRun))
			return nil
		},
	}
	target.add(cmd)
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "the Function's namespace")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "check the deletion without deleting")
	cmd.Flags().StringVar(&dir, "project", ".", "in kfn dev: the project directory kfn dev runs")
	cmd.Flags().DurationVar(&wait, "wait", defaultDevWait, "in kfn dev: how long to wait for kfn dev to stop the Function (0: do not wait)")
	return cmd
}

// --- explain

func newFunctionExplainCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "explain",
		Short: "Explain what a Function is",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprint(cmd.OutOrStdout(), `A Function is code that runs without a server of your own: kfn, as Kyma
does, runs it for every HTTP request sent to it and every event its
Subscriptions deliver, and scales it.

A Function is written in Node.js (nodejs20, nodejs22, nodejs24: main(event,
context); nodejs26: main(req, res)) or Python (python312: main(event,
context); python314: main() with Flask's request). Its source and
dependencies are inline in the Function resource or in a Git repository.

The Function resource is Kyma's serverless.kyma-project.io/v1alpha2 Function;
kfn's README describes it, its runtimes and what differs from Kyma.
`)
			return nil
		},
	}
}
