// Package crds holds kfn's CustomResourceDefinitions, generated from the
// API types' markers by `make generate` (which copies them into the Helm
// chart's files/crds, from which the chart renders them), and embeds them
// so that admission offline (package manifest), `kfn dev` and the tests use
// exactly the CRDs a cluster gets.
package crds

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml
var crdFiles embed.FS

// All returns kfn's CustomResourceDefinitions, parsed, in file-name order.
// It fails only if the embedded files are not valid CRDs, which the
// package's tests rule out.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(crdFiles, "*.yaml")
	if err != nil {
		return nil, fmt.Errorf("list embedded CRDs: %w", err)
	}
	sort.Strings(names)
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(names))
	for _, name := range names {
		data, err := crdFiles.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("read embedded %s: %w", name, err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("parse embedded %s: %w", name, err)
		}
		out = append(out, crd)
	}
	return out, nil
}
