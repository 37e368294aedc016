// Command crdversions adds to a generated CustomResourceDefinition a
// served version whose schema is another version's: Kyma's APIRule
// v2alpha1 has v2's schema, so the CRD serves both from one Go type
// (conversion None: the API server changes only apiVersion). `make
// generate` runs it after controller-gen:
//
//	go run ./hack/crdversions -crd api/crds/gateway.kyma-project.io_apirules.yaml -from v2 -as v2alpha1
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

func main() {
	crd := flag.String("crd", "", "the CRD file to change in place")
	from := flag.String("from", "", "the version whose schema the new one has")
	as := flag.String("as", "", "the version to add (served, not stored)")
	flag.Parse()
	if err := run(*crd, *from, *as); err != nil {
		fmt.Fprintln(os.Stderr, "crdversions:", err)
		os.Exit(1)
	}
}

func run(path, from, as string) error {
	if path == "" || from == "" || as == "" {
		return errors.New("-crd, -from and -as are required")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read CRD: %w", err)
	}
	// Parsed as the type to check it, changed as a map so that what
	// controller-gen wrote stays as it wrote it.
	if err := yaml.UnmarshalStrict(data, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	spec, _ := crd["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	var source map[string]any
	for _, v := range versions {
		v, _ := v.(map[string]any)
		switch v["name"] {
		case as:
			return fmt.Errorf("%s already has version %s", path, as)
		case from:
			source = v
		}
	}
	if source == nil {
		return fmt.Errorf("%s has no version %s", path, from)
	}
	added := runtime.DeepCopyJSON(source)
	added["name"], added["storage"], added["served"] = as, false, true
	spec["versions"] = append(versions, added)
	out, err := yaml.Marshal(crd)
	if err != nil {
		return fmt.Errorf("write CRD: %w", err)
	}
	return os.WriteFile(path, append([]byte("---\n"), out...), 0o644)
}
