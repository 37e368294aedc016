package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/local/project"
)

func newApplyCommand() *cobra.Command {
	var (
		target    targetFlags
		namespace string
		output    string
	)
	cmd := &cobra.Command{
		Use:   "apply DIR",
		Short: "Apply a function folder to a cluster as a Function and its Subscriptions",
		Long: `apply reads a function folder (config.yaml beside handler.js or handler.py
and its dependencies, as 'kfn init' writes and Kyma's CLI reads) and applies
the Function and the Subscriptions it declares to the cluster of the
kubeconfig, with server-side apply (field manager kfn-cli): a second apply
after an edit updates them. Objects go to -n, else to config.yaml's namespace,
else to "default". The API server refuses an invalid one with its reason, and
nothing of the folder is applied then if it is the Function.`,
		Example: `  kfn apply ./orders
  kfn apply -n shop ./orders --kubeconfig ~/.kube/config`,
		Args: exactArgs(1, "the function folder DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			configPath := filepath.Join(args[0], project.ConfigFile)
			if _, err := os.Stat(configPath); err != nil {
				return usagef("%s is not a function folder: it has no %s (write one with 'kfn init')", args[0], project.ConfigFile)
			}
			ns := ""
			if cmd.Flags().Changed("namespace") {
				ns = namespace
			}
			docs, err := project.ReadFolderIn(configPath, ns)
			if err != nil {
				return err
			}
			c, err := target.cluster()
			if err != nil {
				return err
			}
			var applied []any
			for _, d := range docs {
				o := d.Object
				if err := c.client.Apply(cmd.Context(), client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
					return fmt.Errorf("apply %s %s/%s from %s to %s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), d.File, c.where, err)
				}
				applied = append(applied, o.Object)
				if output == outputTable {
					fmt.Fprintf(cmd.OutOrStdout(), "%s %s/%s applied\n", o.GetKind(), o.GetNamespace(), o.GetName())
				}
			}
			if output != outputTable {
				return printObject(cmd.OutOrStdout(), output, applied)
			}
			return nil
		},
	}
	target.add(cmd)
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace to apply to (default: config.yaml's, else default)")
	outputFlag(cmd, &output)
	return cmd
}
