package install

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/kfn-dev/kfn/test/node/singlenode"
)

// KEDANamespace is where KEDA's manifests install it.
const KEDANamespace = "keda"

// KEDA installs KEDA's operator and metrics API server from KEDA's own
// manifests (configDir is its module's config directory; the "minimal" set:
// CRDs, RBAC, operator, metrics API server, no admission webhooks), with
// both running image, and waits until both Deployments are available and
// the external metrics API is served.
func KEDA(ctx context.Context, c *singlenode.Cluster, configDir, image string) error {
	objs, err := kedaObjects(configDir, image)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := c.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply KEDA's %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	for _, name := range []string{"keda-operator", "keda-metrics-apiserver"} {
		if err := waitAvailable(ctx, c, KEDANamespace, name, 3*time.Minute); err != nil {
			return err
		}
	}
	return waitAPIService(ctx, c, "v1beta1.external.metrics.k8s.io", 2*time.Minute)
}

// kedaObjects renders KEDA's minimal kustomization and points its
// containers at image (which holds both /keda and /keda-adapter), never
// pulled: it was imported into the node.
func kedaObjects(configDir, image string) ([]*unstructured.Unstructured, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(configDir, "minimal"))
	if err != nil {
		return nil, fmt.Errorf("render KEDA's manifests in %s: %w", configDir, err)
	}
	data, err := res.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("encode KEDA's manifests: %w", err)
	}
	objs, err := singlenode.DecodeObjects(data)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		if err := setImages(o, image); err != nil {
			return nil, fmt.Errorf("KEDA's Deployment %s: %w", o.GetName(), err)
		}
	}
	return objs, nil
}

// setImages sets every container of a Deployment to image, never pulled.
func setImages(d *unstructured.Unstructured, image string) error {
	containers, found, err := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if err != nil || !found {
		return errors.New("no containers")
	}
	for i := range containers {
		ctr, ok := containers[i].(map[string]any)
		if !ok {
			return errors.New("a container is not an object")
		}
		ctr["image"] = image
		ctr["imagePullPolicy"] = "Never"
	}
	return unstructured.SetNestedSlice(d.Object, containers, "spec", "template", "spec", "containers")
}

// waitAvailable waits until the Deployment has all its replicas available.
func waitAvailable(ctx context.Context, c *singlenode.Cluster, namespace, name string, d time.Duration) error {
	return poll(ctx, d, func(ctx context.Context) error {
		dep := &appsv1.Deployment{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, dep); err != nil {
			return err
		}
		want := int32(1)
		if dep.Spec.Replicas != nil {
			want = *dep.Spec.Replicas
		}
		if dep.Status.AvailableReplicas < want || dep.Status.UpdatedReplicas < want {
			return fmt.Errorf("deployment %s/%s: %d of %d replicas available", namespace, name, dep.Status.AvailableReplicas, want)
		}
		return nil
	}, func() string { return c.Describe(context.Background(), namespace) })
}

// waitAPIService waits until the aggregated API is Available.
func waitAPIService(ctx context.Context, c *singlenode.Cluster, name string, d time.Duration) error {
	return poll(ctx, d, func(ctx context.Context) error {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("apiregistration.k8s.io/v1")
		u.SetKind("APIService")
		if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, raw := range conds {
			cond, _ := raw.(map[string]any)
			if cond["type"] == "Available" {
				if cond["status"] == "True" {
					return nil
				}
				return fmt.Errorf("APIService %s not available: %v: %v", name, cond["reason"], cond["message"])
			}
		}
		return fmt.Errorf("APIService %s has no Available condition", name)
	}, func() string { return c.Describe(context.Background(), KEDANamespace) })
}

// poll calls check every 500 ms until it succeeds or d passes; the error
// then carries check's last error and what diagnose returns.
func poll(ctx context.Context, d time.Duration, check func(context.Context) error, diagnose func() string) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		err := check(cctx)
		ccancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready after %s: %w\n%s", d, err, diagnose())
		case <-time.After(500 * time.Millisecond):
		}
	}
}
