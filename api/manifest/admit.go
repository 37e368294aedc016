package manifest

import (
	"context"
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metav1validation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	runtimeschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"

	"github.com/kfn-dev/kfn/api/crds"
)

// Admitter defaults and validates custom resources with kfn's CRDs the way
// the API server does on create: unknown fields pruned, OpenAPI defaults
// applied, then metadata, schema, list-type and CEL validation. It is safe
// for concurrent use.
type Admitter struct {
	kinds map[runtimeschema.GroupVersionKind]*kind
}

type kind struct {
	namespaced bool
	structural *schema.Structural
	schema     apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

// NewAdmitter builds an Admitter from kfn's CRDs (package crds).
func NewAdmitter() (*Admitter, error) {
	defs, err := crds.All()
	if err != nil {
		return nil, err
	}
	a := &Admitter{kinds: map[runtimeschema.GroupVersionKind]*kind{}}
	for _, crd := range defs {
		for _, v := range crd.Spec.Versions {
			k, err := newKind(crd, v)
			if err != nil {
				return nil, fmt.Errorf("CRD %s version %s: %w", crd.Name, v.Name, err)
			}
			gvk := runtimeschema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
			a.kinds[gvk] = k
		}
	}
	return a, nil
}

func newKind(crd *apiextensionsv1.CustomResourceDefinition, v apiextensionsv1.CustomResourceDefinitionVersion) (*kind, error) {
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		return nil, fmt.Errorf("no schema")
	}
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
		return nil, fmt.Errorf("convert schema: %w", err)
	}
	structural, err := schema.NewStructural(internal)
	if err != nil {
		return nil, fmt.Errorf("structural schema: %w", err)
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(internal)
	if err != nil {
		return nil, fmt.Errorf("schema validator: %w", err)
	}
	return &kind{
		namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
		structural: structural,
		schema:     validator,
		cel:        cel.NewValidator(structural, true, celconfig.PerCallLimit),
	}, nil
}

// Knows reports whether gvk is one of kfn's kinds.
func (a *Admitter) Knows(gvk runtimeschema.GroupVersionKind) bool {
	_, ok := a.kinds[gvk]
	return ok
}

// Admit prunes unknown fields from obj, applies the CRD's defaults to it in
// place, and returns what the API server would refuse, with the same field
// paths and messages. A namespaced object without a namespace is validated
// as if it were in "default", as kubectl does. Admit returns an error list
// with one entry for a kind kfn does not define.
func (a *Admitter) Admit(ctx context.Context, obj *unstructured.Unstructured) field.ErrorList {
	gvk := obj.GroupVersionKind()
	k, ok := a.kinds[gvk]
	if !ok {
		return field.ErrorList{field.NotSupported(field.NewPath("kind"), gvk.String(), a.supported())}
	}
	if k.namespaced && obj.GetNamespace() == "" {
		obj.SetNamespace("default")
	}
	pruning.Prune(obj.Object, k.structural, true)
	defaulting.Default(obj.Object, k.structural)

	var errs field.ErrorList
	errs = append(errs, metav1validation.ValidateObjectMetaAccessor(obj, k.namespaced, metav1validation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj.UnstructuredContent(), k.schema)...)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, k.structural, obj.Object)...)
	if blocking(errs) {
		// As the API server: CEL rules are not run on an object whose
		// shape is wrong; the user fixes the errors above first.
		return append(errs, field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"))
	}
	celErrs, _ := k.cel.Validate(ctx, nil, k.structural, obj.Object, nil, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// blocking reports whether errs has an error after which the API server
// does not evaluate CEL rules.
func blocking(errs field.ErrorList) bool {
	for _, err := range errs {
		switch err.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return true
		}
	}
	return false
}

func (a *Admitter) supported() []string {
	out := make([]string, 0, len(a.kinds))
	for gvk := range a.kinds {
		out = append(out, gvk.Kind+"."+gvk.Group+"/"+gvk.Version)
	}
	return out
}
