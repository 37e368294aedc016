package project

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	eventingv1alpha2 "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/api/manifest"
	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
)

// ConfigFile is the name of a function folder's configuration file.
const ConfigFile = "config.yaml"

// ErrInvalidFolder is wrapped by errors about a function folder that cannot
// be turned into a Function.
var ErrInvalidFolder = errors.New("invalid function folder")

// FolderConfig is the config.yaml of a Kyma-CLI function folder, with kfn's
// additions (replicas, scaleConfig, annotations).
type FolderConfig struct {
	// Name is the Function's name. Required.
	Name string `json:"name"`
	// Namespace defaults to "default".
	Namespace string `json:"namespace,omitempty"`
	// Runtime is the Function's spec.runtime. Required.
	Runtime string `json:"runtime"`
	// RuntimeImageOverride is spec.runtimeImageOverride.
	RuntimeImageOverride string `json:"runtimeImageOverride,omitempty"`
	// Labels are the pods' labels.
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are the pods' annotations (kfn addition).
	Annotations map[string]string `json:"annotations,omitempty"`
	// Source says where the code is.
	Source FolderSource `json:"source"`
	// Resources are explicit requests and limits.
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// Env is the Function's spec.env.
	Env []serverlessv1alpha2.EnvVar `json:"env,omitempty"`
	// Replicas is spec.replicas (kfn addition).
	Replicas *int32 `json:"replicas,omitempty"`
	// ScaleConfig is spec.scaleConfig (kfn addition).
	ScaleConfig *serverlessv1alpha2.ScaleConfig `json:"scaleConfig,omitempty"`
	// Subscriptions deliver events to this Function.
	Subscriptions []FolderSubscription `json:"subscriptions,omitempty"`
	// APIRules are accepted for compatibility with Kyma CLI and not used
	// locally, where the gateway exposes every Function.
	APIRules json.RawMessage `json:"apiRules,omitempty"`
	// SchemaVersion is Kyma CLI's format version (v1).
	SchemaVersion string `json:"schemaVersion,omitempty"`
}

// FolderSource is the source section of config.yaml.
type FolderSource struct {
	// SourceType is inline (default) or git.
	SourceType string `json:"sourceType,omitempty"`
	// SourcePath is the directory with the code, relative to config.yaml or absolute.
	SourcePath string `json:"sourcePath,omitempty"`
	// SourceHandlerName is the code file, relative to SourcePath.
	SourceHandlerName string `json:"sourceHandlerName,omitempty"`
	// DepsHandlerName is the dependencies file, relative to SourcePath.
	DepsHandlerName string `json:"depsHandlerName,omitempty"`
	// URL, Repository, Reference, BaseDir, CredentialsType and
	// CredentialsSecretName describe a git source.
	URL                   string `json:"url,omitempty"`
	Repository            string `json:"repository,omitempty"`
	Reference             string `json:"reference,omitempty"`
	BaseDir               string `json:"baseDir,omitempty"`
	CredentialsType       string `json:"credentialsType,omitempty"`
	CredentialsSecretName string `json:"credentialsSecretName,omitempty"`
}

// FolderSubscription is a Subscription declared in config.yaml; its sink is
// the folder's Function.
type FolderSubscription struct {
	// Name defaults to the Function's name.
	Name string `json:"name,omitempty"`
	// TypeMatching is standard (default) or exact.
	TypeMatching string `json:"typeMatching,omitempty"`
	// Source is the events' source.
	Source string `json:"source"`
	// Types are the event types.
	Types []string `json:"types"`
	// Config is the Subscription's spec.config.
	Config map[string]string `json:"config,omitempty"`
}

// IsFolderConfig reports whether data is a function folder's config.yaml
// rather than a Kubernetes manifest: an object with a runtime and without
// apiVersion and kind.
func IsFolderConfig(data []byte) bool {
	var head map[string]any
	if err := yaml.Unmarshal(data, &head); err != nil || head == nil {
		return false
	}
	_, hasRuntime := head["runtime"]
	_, hasKind := head["kind"]
	_, hasAPIVersion := head["apiVersion"]
	return hasRuntime && !hasKind && !hasAPIVersion
}

// ReadFolder turns the function folder whose config.yaml is at configPath
// into a Function and its Subscriptions, as documents for the admitter. The
// documents name config.yaml as their file, so messages point there. The
// error wraps ErrInvalidFolder.
func ReadFolder(configPath string) ([]manifest.Document, error) {
	return ReadFolderIn(configPath, "")
}

// ReadFolderIn is ReadFolder with the objects in namespace (and the
// Subscriptions' sinks pointing there), whatever config.yaml says; an empty
// namespace keeps config.yaml's, or "default".
func ReadFolderIn(configPath, namespace string) ([]manifest.Document, error) {
	data, err := os.ReadFile(configPath)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidFolder, err)
	}
	var cfg FolderConfig
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidFolder, configPath, err)
	}
	if cfg.Name == "" {
		return nil, fmt.Errorf("%w: %s: name is required", ErrInvalidFolder, configPath)
	}
	if namespace != "" {
		cfg.Namespace = namespace
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	fn, err := folderFunction(filepath.Dir(configPath), &cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidFolder, configPath, err)
	}
	docs := make([]manifest.Document, 0, 1+len(cfg.Subscriptions))
	obj, err := toUnstructured(fn)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidFolder, configPath, err)
	}
	docs = append(docs, manifest.Document{File: configPath, Index: 1, Object: obj})
	for i, s := range cfg.Subscriptions {
		sub := folderSubscription(&cfg, s)
		obj, err := toUnstructured(sub)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: subscriptions[%d]: %w", ErrInvalidFolder, configPath, i, err)
		}
		docs = append(docs, manifest.Document{File: configPath, Index: 2 + i, Object: obj})
	}
	return docs, nil
}

func folderFunction(dir string, cfg *FolderConfig) (*serverlessv1alpha2.Function, error) {
	fn := &serverlessv1alpha2.Function{
		TypeMeta:   metav1.TypeMeta{APIVersion: serverlessv1alpha2.GroupVersion.String(), Kind: "Function"},
		ObjectMeta: metav1.ObjectMeta{Name: cfg.Name, Namespace: cfg.Namespace},
		Spec: serverlessv1alpha2.FunctionSpec{
			Runtime:              serverlessv1alpha2.Runtime(cfg.Runtime),
			RuntimeImageOverride: cfg.RuntimeImageOverride,
			Labels:               cfg.Labels,
			Annotations:          cfg.Annotations,
			Env:                  cfg.Env,
			Replicas:             cfg.Replicas,
			ScaleConfig:          cfg.ScaleConfig,
		},
	}
	if cfg.Resources != nil {
		fn.Spec.ResourceConfiguration = &serverlessv1alpha2.ResourceConfiguration{
			Function: &serverlessv1alpha2.ResourceRequirements{Resources: cfg.Resources},
		}
	}
	switch cfg.Source.SourceType {
	case "git":
		git := &serverlessv1alpha2.GitRepositorySource{
			URL:        cfg.Source.URL,
			Repository: serverlessv1alpha2.Repository{BaseDir: cfg.Source.BaseDir, Reference: cfg.Source.Reference},
		}
		if cfg.Source.CredentialsSecretName != "" {
			typ := serverlessv1alpha2.RepositoryAuthType(cfg.Source.CredentialsType)
			if typ == "" {
				typ = serverlessv1alpha2.RepositoryAuthBasic
			}
			git.Auth = &serverlessv1alpha2.RepositoryAuth{Type: typ, SecretName: cfg.Source.CredentialsSecretName}
		}
		fn.Spec.Source.GitRepository = git
	case "", "inline":
		inline, err := readInline(dir, cfg)
		if err != nil {
			return nil, err
		}
		fn.Spec.Source.Inline = inline
	default:
		return nil, fmt.Errorf("source.sourceType %q: want inline or git", cfg.Source.SourceType)
	}
	return fn, nil
}

// readInline reads the handler and, when present, the dependencies file.
func readInline(dir string, cfg *FolderConfig) (*serverlessv1alpha2.InlineSource, error) {
	base := dir
	if p := cfg.Source.SourcePath; p != "" {
		base = p
		if !filepath.IsAbs(p) {
			base = filepath.Join(dir, p)
		}
	}
	python := serverlessv1alpha2.Runtime(cfg.Runtime).IsPython()
	handler, deps := DefaultFiles(serverlessv1alpha2.Runtime(cfg.Runtime))
	if cfg.Source.SourceHandlerName != "" {
		handler = cfg.Source.SourceHandlerName
	} else if !python && !exists(filepath.Join(base, handler)) && exists(filepath.Join(base, "handler.mjs")) {
		handler = "handler.mjs"
	}
	if cfg.Source.DepsHandlerName != "" {
		deps = cfg.Source.DepsHandlerName
	}
	src, err := os.ReadFile(filepath.Join(base, handler))
	if err != nil {
		return nil, fmt.Errorf("read the handler: %w", err)
	}
	inline := &serverlessv1alpha2.InlineSource{Source: string(src)}
	depsData, err := os.ReadFile(filepath.Join(base, deps))
	switch {
	case err == nil:
		inline.Dependencies = string(depsData)
	case errors.Is(err, os.ErrNotExist) && cfg.Source.DepsHandlerName == "":
		// No dependencies: fine.
	default:
		return nil, fmt.Errorf("read the dependencies: %w", err)
	}
	return inline, nil
}

func folderSubscription(cfg *FolderConfig, s FolderSubscription) *eventingv1alpha2.Subscription {
	name := s.Name
	if name == "" {
		name = cfg.Name
	}
	sub := &eventingv1alpha2.Subscription{
		TypeMeta:   metav1.TypeMeta{APIVersion: eventingv1alpha2.GroupVersion.String(), Kind: "Subscription"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cfg.Namespace},
		Spec: eventingv1alpha2.SubscriptionSpec{
			Sink:         "http://" + cfg.Name + "." + cfg.Namespace + eventingv1alpha2.ClusterLocalSuffix,
			TypeMatching: eventingv1alpha2.TypeMatching(s.TypeMatching),
			Source:       s.Source,
			Types:        s.Types,
		},
	}
	if s.Config != nil {
		sub.Spec.Config = make(map[string]eventingv1alpha2.ConfigValue, len(s.Config))
		for k, v := range s.Config {
			sub.Spec.Config[k] = eventingv1alpha2.ConfigValue(v)
		}
	}
	return sub
}

func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: content}
	// Drop what a hand-written manifest would not have, so the admitter
	// sees the same object a user would apply.
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	return u, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
