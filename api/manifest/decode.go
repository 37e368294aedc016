package manifest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	gatewayv2 "github.com/kfn-dev/kfn/api/gateway/v2"
	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
)

// Document is one object of a manifest file.
type Document struct {
	// File is the file the object came from.
	File string
	// Index is the object's 1-based position in the file.
	Index int
	// Object is the object as written.
	Object *unstructured.Unstructured
}

// Where names the document for messages: file (document N).
func (d Document) Where() string {
	return fmt.Sprintf("%s (document %d)", d.File, d.Index)
}

// ErrMalformed is wrapped by errors about documents that are not valid
// YAML objects.
var ErrMalformed = errors.New("malformed manifest")

// Decode splits a YAML or JSON manifest into its objects: several documents
// separated by "---", and the items of a kind List, in order. Empty
// documents are skipped. The error wraps ErrMalformed and names the file and
// document.
func Decode(file string, data []byte) ([]Document, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs []Document
	for n := 1; ; n++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s (document %d): %w", ErrMalformed, file, n, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		data, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %s (document %d): %w", ErrMalformed, file, n, err)
		}
		if string(data) == "null" {
			continue // only comments
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := json.Unmarshal(data, &head); err != nil {
			return nil, fmt.Errorf("%w: %s (document %d): not an object: %w", ErrMalformed, file, n, err)
		}
		if head.APIVersion == "" || head.Kind == "" {
			return nil, fmt.Errorf("%w: %s (document %d): apiVersion and kind are required", ErrMalformed, file, n)
		}
		// Decode as the API server does: integers stay integers.
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("%w: %s (document %d): %w", ErrMalformed, file, n, err)
		}
		if obj.IsList() {
			list, err := obj.ToList()
			if err != nil {
				return nil, fmt.Errorf("%w: %s (document %d): %w", ErrMalformed, file, n, err)
			}
			for i := range list.Items {
				docs = append(docs, Document{File: file, Index: n, Object: &list.Items[i]})
			}
			continue
		}
		docs = append(docs, Document{File: file, Index: n, Object: obj})
	}
}

// InvalidError is a document the API server would refuse.
type InvalidError struct {
	// Document is the refused object as written.
	Document Document
	// Errs are the reasons, with field paths.
	Errs field.ErrorList
}

// Error reads like kubectl's: file (document N): Kind "name" is invalid: reasons.
func (e *InvalidError) Error() string {
	obj := e.Document.Object
	return fmt.Sprintf("%s: %s %q is invalid: %s", e.Document.Where(), obj.GetKind(), obj.GetName(), e.Errs.ToAggregate().Error())
}

// Set is what a group of manifests defines.
type Set struct {
	// Functions are the admitted Functions, defaulted.
	Functions []*serverlessv1alpha2.Function
	// Subscriptions are the admitted Subscriptions, defaulted.
	Subscriptions []*eventingv1alpha2.Subscription
	// APIRules are the admitted APIRules (v2, or v2alpha1 read as v2:
	// the same schema), defaulted.
	APIRules []*gatewayv2.APIRule
	// Ignored are documents of kinds kfn does not run (Services,
	// ConfigMaps...).
	Ignored []Document
	// Invalid are the documents that would be refused, one error each
	// (*InvalidError or a conversion error naming the document).
	Invalid []error
}

// Load admits every document and sorts them into a Set: the valid ones
// become typed objects, the others are reported without stopping the rest.
// Two documents with the same kind, namespace and name: the later one is
// reported as invalid.
func (a *Admitter) Load(ctx context.Context, docs []Document) Set {
	var set Set
	seen := map[string]Document{}
	for _, doc := range docs {
		if !a.Knows(doc.Object.GroupVersionKind()) {
			if isKfnGroup(doc.Object.GetAPIVersion()) {
				set.Invalid = append(set.Invalid, &InvalidError{Document: doc, Errs: field.ErrorList{
					field.NotSupported(field.NewPath("apiVersion").Key(doc.Object.GetKind()), doc.Object.GetAPIVersion(), a.supported()),
				}})
				continue
			}
			set.Ignored = append(set.Ignored, doc)
			continue
		}
		obj := doc.Object.DeepCopy()
		if errs := a.Admit(ctx, obj); len(errs) > 0 {
			set.Invalid = append(set.Invalid, &InvalidError{Document: doc, Errs: errs})
			continue
		}
		key := obj.GetKind() + "/" + obj.GetNamespace() + "/" + obj.GetName()
		if first, dup := seen[key]; dup {
			set.Invalid = append(set.Invalid, &InvalidError{Document: doc, Errs: field.ErrorList{
				field.Duplicate(field.NewPath("metadata", "name"), fmt.Sprintf("%s/%s, already defined in %s", obj.GetNamespace(), obj.GetName(), first.Where())),
			}})
			continue
		}
		seen[key] = doc
		switch obj.GetKind() {
		case "Function":
			fn := &serverlessv1alpha2.Function{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, fn); err != nil {
				set.Invalid = append(set.Invalid, fmt.Errorf("%s: %w", doc.Where(), err))
				continue
			}
			set.Functions = append(set.Functions, fn)
		case "Subscription":
			sub := &eventingv1alpha2.Subscription{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, sub); err != nil {
				set.Invalid = append(set.Invalid, fmt.Errorf("%s: %w", doc.Where(), err))
				continue
			}
			set.Subscriptions = append(set.Subscriptions, sub)
		case "APIRule":
			rule := &gatewayv2.APIRule{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, rule); err != nil {
				set.Invalid = append(set.Invalid, fmt.Errorf("%s: %w", doc.Where(), err))
				continue
			}
			rule.APIVersion = gatewayv2.GroupVersion.String() // v2alpha1 is v2's schema
			set.APIRules = append(set.APIRules, rule)
		}
	}
	return set
}

// isKfnGroup reports whether apiVersion is in one of kfn's API groups, so a
// wrong version or kind of a kfn object is reported instead of ignored.
func isKfnGroup(apiVersion string) bool {
	return strings.HasPrefix(apiVersion, serverlessv1alpha2.GroupVersion.Group+"/") ||
		strings.HasPrefix(apiVersion, eventingv1alpha2.GroupVersion.Group+"/") ||
		strings.HasPrefix(apiVersion, gatewayv2.GroupVersion.Group+"/")
}
