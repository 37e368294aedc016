package controller

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// imagesFlag is --runtime-image runtime=image, repeated: each sets one
// runtime's image and leaves the others as they are.
type imagesFlag struct {
	images *map[string]string
	// given are the values set, in order, for reapply.
	given []string
}

func (f *imagesFlag) String() string { return strings.Join(f.given, " ") }

func (f *imagesFlag) Set(v string) error {
	rt, img, ok := strings.Cut(v, "=")
	if !ok || rt == "" || img == "" {
		return errors.New("want runtime=image, for example nodejs22=registry/kfn/runtime-nodejs22:1.0")
	}
	if *f.images == nil {
		*f.images = map[string]string{}
	}
	(*f.images)[rt] = img
	f.given = append(f.given, v)
	return nil
}

// reapply sets the images given again, over those of a config file.
func (f *imagesFlag) reapply() {
	if *f.images == nil && len(f.given) > 0 {
		*f.images = map[string]string{}
	}
	for _, v := range f.given {
		rt, img, _ := strings.Cut(v, "=")
		(*f.images)[rt] = img
	}
}

// wordsFlag is a command given as one string, split at spaces.
type wordsFlag []string

func (f *wordsFlag) String() string { return joinWords(*f) }

func (f *wordsFlag) Set(v string) error {
	*f = strings.Fields(v)
	return nil
}

// listFlag is a list given as one comma-separated string.
type listFlag []string

func (f *listFlag) String() string { return strings.Join(*f, ",") }

func (f *listFlag) Set(v string) error {
	*f = nil
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" {
			*f = append(*f, e)
		}
	}
	return nil
}

// quantityFlag is a Kubernetes quantity (256Mi).
type quantityFlag resource.Quantity

func (f *quantityFlag) String() string { return (*resource.Quantity)(f).String() }

func (f *quantityFlag) Set(v string) error {
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return fmt.Errorf("want a quantity such as 256Mi: %w", err)
	}
	_ = q.String() // cache the canonical form, as the defaults have it
	*f = quantityFlag(q)
	return nil
}

// int32Flag is an int32 setting.
type int32Flag int32

func (f *int32Flag) String() string { return strconv.FormatInt(int64(*f), 10) }

func (f *int32Flag) Set(v string) error {
	n, err := strconv.ParseInt(v, 0, 32)
	if err != nil {
		return fmt.Errorf("want a 32-bit integer: %w", err)
	}
	*f = int32Flag(n)
	return nil
}

// authenticationFlag is a KEDA authentication reference written Kind/name;
// empty is none. A value without a kind is kept with an empty kind, which
// function.Config.Validate refuses with a clear message.
type authenticationFlag struct {
	ref **kedav1alpha1.AuthenticationRef
}

func (f authenticationFlag) String() string {
	if f.ref == nil {
		return ""
	}
	return formatAuthentication(*f.ref)
}

func (f authenticationFlag) Set(v string) error {
	*f.ref = parseAuthentication(v)
	return nil
}

// parseAuthentication reads "Kind/name" ("" is nil).
func parseAuthentication(v string) *kedav1alpha1.AuthenticationRef {
	if v == "" {
		return nil
	}
	kind, name, ok := strings.Cut(v, "/")
	if !ok {
		kind, name = "", v
	}
	return &kedav1alpha1.AuthenticationRef{Kind: kind, Name: name}
}

// formatAuthentication is parseAuthentication's inverse.
func formatAuthentication(a *kedav1alpha1.AuthenticationRef) string {
	switch {
	case a == nil:
		return ""
	case a.Kind == "":
		return a.Name
	default:
		return a.Kind + "/" + a.Name
	}
}
