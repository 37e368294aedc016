package cli

// The two commands that write a new function: kfn init (a function folder
// kfn dev runs) and kfn function init (Kyma CLI's, a handler and its
// dependencies), each from its scaffold in local/project, through one
// writer.

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
			files, err := project.FolderScaffold.Files(name, namespace, rt)
			if err != nil {
				return err
			}
			if err := writeScaffold(dir, files, refuseNonEmpty); err != nil {
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

func newFunctionInitCommand() *cobra.Command {
	mk := func(language string) *cobra.Command {
		var dir, version string
		use, short := language+" [flags]", "Write the source and dependency files of a "+language+" function"
		if language == "" {
			use, short = "init [flags]", "Write the source and dependency files of a function (Node.js; init python for Python)"
		}
		cmd := &cobra.Command{
			Use:   use,
			Short: short,
			Args:  exactArgs(0, "no arguments"),
			RunE: func(cmd *cobra.Command, _ []string) error {
				lang := language
				if lang == "" {
					lang = "nodejs"
				}
				rt, err := runtimeOf(lang, version)
				if err != nil {
					return err
				}
				files, err := project.KymaScaffold.Files("", "", rt)
				if err != nil {
					return err
				}
				if err := writeScaffold(dir, files, refuseOtherContent); err != nil {
					return err
				}
				handlerFile, depsFile := project.DefaultFiles(rt)
				abs, err := filepath.Abs(dir)
				if err != nil {
					abs = dir
				}
				out := cmd.OutOrStdout()
				fmt.Fprintf(out, "Function files of runtime %s initialized to dir %s\n\n", lang, abs)
				fmt.Fprintf(out, "Next steps:\n* edit %s and %s\n* create the Function, for example:\n  kfn function create %s my-function --source %s --dependencies %s\n",
					handlerFile, depsFile, lang, filepath.Join(dir, handlerFile), filepath.Join(dir, depsFile))
				return nil
			},
		}
		cmd.Flags().StringVar(&dir, "dir", ".", "directory to write the files in (made when missing)")
		def, versions := defaultNodeVersion, nodeVersions
		if language == "python" {
			def, versions = defaultPythonVersion, pythonVersions
		}
		cmd.Flags().StringVarP(&version, "version", "v", def, "runtime version: "+strings.Join(versions, ", ")+" (kfn's addition: 26 and 3.14 write Kyma's newer handler API)")
		return cmd
	}
	cmd := mk("")
	cmd.AddCommand(mk("nodejs"), mk("python"))
	return cmd
}

// writeScaffold writes files into dir, made when missing, unless refuse
// finds a reason not to: it writes nothing then.
func writeScaffold(dir string, files map[string]string, refuse func(dir string, files map[string]string) error) error {
	if err := refuse(dir, files); err != nil {
		return err
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

// refuseNonEmpty refuses a dir that exists and is not empty (kfn init).
func refuseNonEmpty(dir string, _ map[string]string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case err == nil && len(entries) > 0:
		return fmt.Errorf("%s is not empty: choose another --dir or name", dir)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("read %s: %w", dir, err)
	}
	return nil
}

// refuseOtherContent refuses when one of the files exists with other
// content (kfn function init, as Kyma's CLI).
func refuseOtherContent(dir string, files map[string]string) error {
	for _, name := range sortedKeys(files) {
		if data, err := os.ReadFile(filepath.Join(dir, name)); err == nil && string(data) != files[name] {
			return fmt.Errorf("%s exists: remove it, or choose another --dir", filepath.Join(dir, name))
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
