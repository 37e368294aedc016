package install

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/kfn-dev/kfn/test/node/singlenode"
)

// fieldOwner is the field manager of what this package applies itself
// (named after the package's first name, clusterinstall: a cluster
// installed before keeps one manager for its fields).
const fieldOwner = "kfn-clusterinstall"

// Release and Namespace are the Helm release of kfn and its namespace.
const (
	Release   = "kfn"
	Namespace = "kfn-system"
)

// LocalImages names the images test/node/images.sh builds and imports.
type LocalImages struct {
	// Registry and Tag of kfn's image and runtime images
	// (Registry/kfn:Tag, Registry/runtime-<runtime>:Tag).
	Registry, Tag string
	// NATS is the NATS server image, repository:tag.
	NATSRepository, NATSTag string
}

// ProfileEnv names the environment variable that chooses the chart's
// profile of the shared install (Platform): "ha" or "small"; empty:
// DefaultProfile.
const ProfileEnv = "KFN_CLUSTER_PROFILE"

// DefaultProfile is the chart profile Platform installs unless ProfileEnv
// says otherwise: the chart's default, ha (3 NATS servers, R3 streams, 2
// of every other component), which the 2-core node holds with the CPU
// requests of LocalValues; installing it took 14-16 s against small's 10 s.
const DefaultProfile = "ha"

// NodeImages are the images test/node/images.sh imports into the node:
// kfn's tagged tag (dev; test/node/release-images.sh's
// release-<commit> for an earlier commit's), and NATS version natsVersion
// of the node's binaries (singlenode.ComponentVersion).
func NodeImages(tag, natsVersion string) LocalImages {
	return LocalImages{Registry: "localhost/kfn", Tag: tag, NATSRepository: "localhost/kfn-cluster/nats", NATSTag: natsVersion}
}

// LocalValues are the chart values of a cluster whose images were imported
// into the node, not pulled: the chart's profile (ha or small), kfn's images
// never pulled, NetworkPolicies on, deliveries only into the node's pod and
// Service networks, NATS with a small volume, and Functions with the XS
// preset by default (50m of CPU asked for each) so that a 2-core node holds
// the Functions of six scenarios at once: with S (100m) a cold make test
// once left a scenario's pods unschedulable ("Insufficient cpu"). The
// platform's pods ask for less CPU than the chart's defaults (platformCPU;
// their limits stay): with the ha profile's 9 pods the chart's requests,
// 1.3 cores, left the scenarios' Functions unschedulable on the 2 cores.
func LocalValues(img LocalImages, profile string) map[string]any {
	cpu := func(c string) map[string]any {
		return map[string]any{"resources": map[string]any{"requests": map[string]any{"cpu": c}}}
	}
	vals := map[string]any{
		"profile": profile,
		"image": map[string]any{
			"registry":   img.Registry,
			"repository": "kfn",
			"tag":        img.Tag,
			"pullPolicy": "Never",
		},
		"runtimes": map[string]any{"registry": img.Registry, "tag": img.Tag},
		"functions": map[string]any{
			"defaultProfile": "XS",
			// The warm pool runs, but keeps standby pods only in the
			// namespaces that ask (kfn.dev/warm-pool-size): the
			// scenarios' pods are theirs, and the node's 2 cores hold them.
			"warmPool": map[string]any{"size": 0},
		},
		"networkPolicy": map[string]any{"enabled": true},
		"eventbridge": map[string]any{
			"dispatcher": map[string]any{"sinkNetworks": []any{singlenode.DefaultClusterCIDR, singlenode.DefaultServiceCIDR}},
			"resources":  map[string]any{"requests": map[string]any{"cpu": platformCPU["eventbridge"]}},
		},
		"controller": cpu(platformCPU["controller"]),
		"scaler":     cpu(platformCPU["scaler"]),
		"keda":       map[string]any{"enabled": true},
		"nats": map[string]any{
			"image": map[string]any{"repository": img.NATSRepository, "tag": img.NATSTag, "pullPolicy": "Never"},
			"jetstream": map[string]any{
				// JetStream's store (80% of it) holds what the streams
				// and the dependency cache reserve with 3 partitions
				// (5.25 GiB, the upgrade scenario's; the chart refuses
				// less); the node's volumes take only what is written.
				"fileStorage": map[string]any{"size": "7Gi"},
			},
			"resources": map[string]any{"requests": map[string]any{"cpu": platformCPU["nats"]}},
		},
	}
	return vals
}

// platformCPU is the CPU each pod of kfn's asks for on the node: 500m for
// the ha profile's 9 pods, less than the small profile's 4 with the
// chart's requests (550m).
var platformCPU = map[string]string{"controller": "50m", "eventbridge": "100m", "scaler": "25m", "nats": "50m"}

// Kfn installs the chart in chartDir as release "kfn" in namespace
// kfn-system (created) through the Helm SDK, with vals over the chart's
// values, and waits up to timeout until every object is ready. CRDs an
// earlier install left (helm uninstall keeps them) are taken over
// (--take-ownership).
func Kfn(ctx context.Context, kubeconfig, chartDir string, vals map[string]any, timeout time.Duration) error {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return fmt.Errorf("load chart %s: %w", chartDir, err)
	}
	cfg, err := helmConfig(kubeconfig)
	if err != nil {
		return err
	}
	install := action.NewInstall(cfg)
	install.ReleaseName = Release
	install.Namespace = Namespace
	install.CreateNamespace = true
	install.TakeOwnership = true
	install.ServerSideApply = true
	install.WaitStrategy = kube.StatusWatcherStrategy
	install.Timeout = timeout
	if _, err := install.RunWithContext(ctx, ch, vals); err != nil {
		return fmt.Errorf("helm install %s %s: %w", Release, chartDir, err)
	}
	return nil
}

// helmConfig is a Helm action configuration for the release's namespace
// of the cluster behind kubeconfig, with releases in Secrets as helm's own.
func helmConfig(kubeconfig string) (*action.Configuration, error) {
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &kubeconfig
	ns := Namespace
	flags.Namespace = &ns
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.NewTextHandler(io.Discard, nil)))
	if err := cfg.Init(flags, Namespace, "secret"); err != nil {
		return nil, fmt.Errorf("helm configuration: %w", err)
	}
	return cfg, nil
}

// Upgrade upgrades release "kfn" to the chart in chartDir as the chart's
// README tells users to: helm upgrade --reset-then-reuse-values (the
// values set before, the new chart's defaults for the rest) with vals over
// them, --take-ownership and --force-conflicts (the CRDs of a release of
// chart 0.1.0 are not the release's, and may have been applied by kubectl). It waits up to timeout until every object is ready.
func Upgrade(ctx context.Context, kubeconfig, chartDir string, vals map[string]any, timeout time.Duration) error {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return fmt.Errorf("load chart %s: %w", chartDir, err)
	}
	cfg, err := helmConfig(kubeconfig)
	if err != nil {
		return err
	}
	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace = Namespace
	upgrade.ResetThenReuseValues = true
	upgrade.TakeOwnership = true
	upgrade.ForceConflicts = true
	upgrade.WaitStrategy = kube.StatusWatcherStrategy
	upgrade.Timeout = timeout
	if _, err := upgrade.RunWithContext(ctx, Release, ch, vals); err != nil {
		return fmt.Errorf("helm upgrade %s %s: %w", Release, chartDir, err)
	}
	return nil
}

// Uninstall uninstalls release "kfn" and waits up to timeout until its
// objects are gone (the CRDs stay: the chart keeps them).
func Uninstall(kubeconfig string, timeout time.Duration) error {
	cfg, err := helmConfig(kubeconfig)
	if err != nil {
		return err
	}
	uninstall := action.NewUninstall(cfg)
	uninstall.WaitStrategy = kube.StatusWatcherStrategy
	uninstall.Timeout = timeout
	if _, err := uninstall.Run(Release); err != nil {
		return fmt.Errorf("helm uninstall %s: %w", Release, err)
	}
	return nil
}

// Platform installs KEDA and then kfn (the chart in chartDir) into the
// single-node cluster, with the images test/node/images.sh built for the
// binaries in the cluster's BinDir; logf reports each step. values, if
// any, change LocalValues before the install.
func Platform(ctx context.Context, c *singlenode.Cluster, chartDir string, logf func(string, ...any), values ...func(map[string]any)) error {
	keda, err := singlenode.ComponentVersion(c.Config.BinDir, "keda")
	if err != nil {
		return err
	}
	nats, err := singlenode.ComponentVersion(c.Config.BinDir, "nats-server")
	if err != nil {
		return err
	}
	logf("installing KEDA %s", keda)
	start := time.Now()
	if err := KEDA(ctx, c, filepath.Join(c.Config.BinDir, "keda-config"), "localhost/kfn-cluster/keda:"+keda); err != nil {
		return err
	}
	logf("installing kfn with its chart (KEDA took %s)", time.Since(start).Round(time.Second))
	start = time.Now()
	profile := cmp.Or(os.Getenv(ProfileEnv), DefaultProfile)
	logf("chart profile %s (%s)", profile, ProfileEnv)
	vals := LocalValues(NodeImages("dev", nats), profile)
	for _, v := range values {
		v(vals)
	}
	if err := Kfn(ctx, c.Config.KubeconfigPath(), chartDir, vals, 5*time.Minute); err != nil {
		return fmt.Errorf("%w\n%s", err, c.Describe(context.Background(), Namespace))
	}
	logf("kfn installed (%s)", time.Since(start).Round(time.Second))
	return nil
}
