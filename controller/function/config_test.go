package function_test

import (
	"testing"
	"time"

	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kfn-dev/kfn/controller/function"
)

func TestConfigValidate(t *testing.T) {
	require.NoError(t, function.DefaultConfig().Validate())
	for name, mod := range map[string]func(*function.Config){
		"no field manager":     func(c *function.Config) { c.FieldManager = "" },
		"no git fetch image":   func(c *function.Config) { c.Resources.GitFetchImage = "" },
		"git poll under 1s":    func(c *function.Config) { c.GitPollInterval = time.Millisecond },
		"HPA target 0":         func(c *function.Config) { c.Resources.HPACPUUtilization = 0 },
		"resync under 1s":      func(c *function.Config) { c.Resync = 0 },
		"no workers":           func(c *function.Config) { c.Workers = 0 },
		"KEDA check too often": func(c *function.Config) { c.KEDACheckInterval = time.Millisecond },
		"empty runtime image":  func(c *function.Config) { c.Plan.Images["nodejs22"] = "" },
		"empty registry":       func(c *function.Config) { c.Plan.ImageRegistries = []string{""} },
		"no registries":        func(c *function.Config) { c.Plan.ImageRegistries = nil },
		"registry with digest": func(c *function.Config) { c.Plan.ImageRegistries = []string{"ghcr.io/x@sha256:00"} },
		"no tmp limit":         func(c *function.Config) { c.Resources.Volumes.Tmp = resource.Quantity{} },
		"function dir limit under 1Mi": func(c *function.Config) {
			c.Resources.Volumes.FunctionDir = resource.MustParse("100Ki")
		},
		"negative deps limit":           func(c *function.Config) { c.Resources.Volumes.Dependencies = resource.MustParse("-1Gi") },
		"dependency cache not a URL":    func(c *function.Config) { c.Plan.DependencyCacheAddress = "kfn-publisher/_kfn/dependencies" },
		"dependency cache with a query": func(c *function.Config) { c.Plan.DependencyCacheAddress = "http://p/_kfn/dependencies?x=1" },
		"authentication kind": func(c *function.Config) {
			c.Resources.ScalerAuthentication = &kedav1alpha1.AuthenticationRef{Kind: "Secret", Name: "x"}
		},
		"authentication no name": func(c *function.Config) {
			c.Resources.ScalerAuthentication = &kedav1alpha1.AuthenticationRef{Kind: "TriggerAuthentication"}
		},
		"authentication name": func(c *function.Config) {
			c.Resources.ScalerAuthentication = &kedav1alpha1.AuthenticationRef{Kind: "TriggerAuthentication", Name: "Not_A_Name"}
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := function.DefaultConfig()
			mod(&c)
			require.ErrorIs(t, c.Validate(), function.ErrInvalidConfig)
		})
	}
	c := function.DefaultConfig()
	c.Resources.ScalerAuthentication = &kedav1alpha1.AuthenticationRef{Kind: "ClusterTriggerAuthentication", Name: "kfn-scaler"}
	require.NoError(t, c.Validate())
	c.Plan.DependencyCacheAddress = "http://kfn-publisher.kfn-system.svc.cluster.local/_kfn/dependencies"
	require.NoError(t, c.Validate(), "a dependency cache address")
	c.Plan.ImageRegistries = []string{"*"}
	c.Resources.Volumes.Tmp = resource.MustParse("1Mi")
	require.NoError(t, c.Validate(), "* allows any image; 1Mi is the smallest limit")
	require.Equal(t, []string{"docker.io/kfn"}, function.DefaultConfig().Plan.ImageRegistries, "the default images' registry")
}
