package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kfn-dev/kfn/api/manifest"
	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/local/dev"
	"github.com/kfn-dev/kfn/local/project"
)

// The function commands against a kfn dev: its project is a directory of
// manifests, so create writes a Function's manifest there and delete
// removes it; get reads kfn dev's status.

// manifestFile is where create writes a Function into a kfn dev project.
func manifestFile(dir string, fn *serverlessv1alpha2.Function) string {
	name := fn.Name + ".yaml"
	if fn.Namespace != "default" {
		name = fn.Namespace + "-" + name
	}
	return filepath.Join(dir, name)
}

// loadProject reads the kfn dev project in dir as kfn dev reads it.
func loadProject(ctx context.Context, dir string) (*project.Project, *manifest.Admitter, error) {
	admitter, err := manifest.NewAdmitter()
	if err != nil {
		return nil, nil, err
	}
	p, err := project.Load(ctx, dir, admitter)
	if err != nil {
		return nil, nil, err
	}
	return p, admitter, nil
}

// writeDev writes fn's manifest into the kfn dev project (unless
// --dry-run), admitted first as the API server would admit it, and, for a
// new Function, waits until the kfn dev at --addr shows it (waitDev).
func (f *createFlags) writeDev(cmd *cobra.Command, fn *serverlessv1alpha2.Function, u *unstructured.Unstructured) error {
	ctx := cmd.Context()
	p, admitter, err := loadProject(ctx, f.project)
	if err != nil {
		return err
	}
	file := manifestFile(f.project, fn)
	if other, ok := p.Origins[project.ObjectKey("Function", fn.Namespace, fn.Name)]; ok && filepath.Clean(other) != filepath.Clean(file) {
		return fmt.Errorf("Function %s/%s is defined in %s: edit it there, or delete it first", fn.Namespace, fn.Name, other)
	}
	if errs := admitter.Admit(ctx, u); len(errs) > 0 {
		return fmt.Errorf("Function %s/%s is invalid: %w", fn.Namespace, fn.Name, errs.ToAggregate())
	}
	if f.dryRun {
		return nil
	}
	data, err := yaml.Marshal(u.Object)
	if err != nil {
		return fmt.Errorf("encode the manifest: %w", err)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", file)
	if _, ok := p.Origins[project.ObjectKey("Function", fn.Namespace, fn.Name)]; ok {
		return nil // an update: kfn dev restarts the function, which stays listed meanwhile
	}
	waitDev(cmd, &f.target, f.project, f.wait, func(st dev.Status) bool { return hasFunction(st, fn.Namespace, fn.Name) })
	return nil
}

func hasFunction(st dev.Status, namespace, name string) bool {
	for _, f := range st.Functions {
		if f.Namespace == namespace && f.Name == name {
			return true
		}
	}
	return false
}

// waitDev waits, up to bound, until the kfn dev at --addr shows what
// done looks for, and says on stderr when it does not: kfn dev may not
// run (it reads the file when it starts), may run another project, or may
// still be installing dependencies. None of these is an error: the file
// is written.
func waitDev(cmd *cobra.Command, target *targetFlags, dir string, bound time.Duration, done func(dev.Status) bool) {
	if bound <= 0 {
		return
	}
	ep, err := target.endpoints(cmd)
	if err != nil {
		return
	}
	defer ep.close()
	deadline := time.Now().Add(bound)
	for {
		var st dev.Status
		if err := adminGet(cmd, ep, "/status", &st); err != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "%s does not answer: the change takes effect when 'kfn dev %s' runs\n", ep.where, dir)
			return
		}
		if done(st) {
			return
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(cmd.ErrOrStderr(), "%s has not shown the change in %s: is it running the project %s? ('kfn get' shows its problems)\n", ep.where, bound, dir)
			return
		}
		select {
		case <-cmd.Context().Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// devFunctionRows lists kfn dev's functions as Kyma's CLI lists
// Functions: configured False for one that cannot run as written (running
// Unknown), running True when every replica wanted is ready (none at
// zero), False when it fails to start, Unknown while it starts; kfn dev
// keeps no generation.
func devFunctionRows(cmd *cobra.Command, target *targetFlags, namespace string) ([]functionRow, error) {
	ep, err := target.endpoints(cmd)
	if err != nil {
		return nil, err
	}
	defer ep.close()
	var st dev.Status
	if err := adminGet(cmd, ep, "/status", &st); err != nil {
		return nil, err
	}
	var rows []functionRow
	for _, f := range st.Functions {
		if namespace != "" && f.Namespace != namespace {
			continue
		}
		r := functionRow{namespace: f.Namespace, name: f.Name, runtime: f.Runtime, configured: "True", running: "Unknown"}
		switch {
		case strings.HasPrefix(f.Error, string(serverlessv1alpha2.ConditionConfigurationReady)+":"):
			// Cannot run as written (an earlier version may run on).
			r.configured = "False"
		case f.Error != "":
			r.running = "False"
		case f.Ready == f.Replicas:
			r.running = "True"
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// deleteDev removes the manifest that defines the Function from the kfn
// dev project, when that file defines nothing else; a function folder or a
// file with more in it is left to the user, who is told which.
func deleteDev(cmd *cobra.Command, target *targetFlags, dir, namespace, name string, dryRun bool, wait time.Duration) error {
	p, _, err := loadProject(cmd.Context(), dir)
	if err != nil {
		return err
	}
	file, ok := p.Origins[project.ObjectKey("Function", namespace, name)]
	if !ok {
		return fmt.Errorf("delete Function %s/%s: the project %s defines none", namespace, name, dir)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	if filepath.Base(file) == project.ConfigFile && project.IsFolderConfig(data) {
		return fmt.Errorf("Function %s/%s is the function folder %s: remove the folder yourself", namespace, name, filepath.Dir(file))
	}
	docs, err := manifest.Decode(file, data)
	if err != nil {
		return err
	}
	if len(docs) != 1 {
		return fmt.Errorf("Function %s/%s is defined in %s beside %d other objects: remove it from the file yourself", namespace, name, file, len(docs)-1)
	}
	if dryRun {
		return nil
	}
	if err := os.Remove(file); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", file, err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "removed %s\n", file)
	waitDev(cmd, target, dir, wait, func(st dev.Status) bool { return !hasFunction(st, namespace, name) })
	return nil
}
