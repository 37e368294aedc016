package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// The forms of -o, --output.
const (
	outputTable = "table"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

// outputFlag adds -o, --output to a command that prints objects.
func outputFlag(cmd *cobra.Command, output *string) {
	cmd.Flags().StringVarP(output, "output", "o", outputTable, "table, json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{outputTable, outputJSON, outputYAML}, cobra.ShellCompDirectiveNoFileComp))
}

// checkOutput refuses an unknown -o before anything is done.
func checkOutput(output string) error {
	switch output {
	case outputTable, outputJSON, outputYAML:
		return nil
	}
	return usagef("--output %q: want table, json or yaml", output)
}

// printObject writes v as indented JSON or as YAML.
func printObject(w io.Writer, output string, v any) error {
	if output == outputYAML {
		data, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode YAML: %w", err)
		}
		_, err = w.Write(data)
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
