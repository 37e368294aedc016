package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kfn-dev/kfn/test/node/singlenode"
)

// standbyCost is what the idle standby pods of one runtime use, as the
// kubelet reports it: the median pod's memory working set and CPU rate.
type standbyCost struct {
	pods          int
	memoryMiB     float64
	cpuMillicores float64
}

// summary is the part of the kubelet's stats summary
// (/api/v1/nodes/<node>/proxy/stats/summary) the cost is read from.
type summary struct {
	Pods []struct {
		PodRef struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"podRef"`
		CPU *struct {
			UsageNanoCores *uint64 `json:"usageNanoCores"`
		} `json:"cpu"`
		Memory *struct {
			WorkingSetBytes *uint64 `json:"workingSetBytes"`
		} `json:"memory"`
	} `json:"pods"`
}

// measureStandbyCost reads the kubelet's summary of the standby pods of ns
// (kfn-pool-<runtime>-<id>) once they have been idle for idle, by
// runtime.
func measureStandbyCost(ctx context.Context, c *singlenode.Cluster, ns string, idle time.Duration) (map[string]standbyCost, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(idle):
	}
	raw, err := c.Clientset.CoreV1().RESTClient().Get().
		AbsPath("/api/v1/nodes", c.Config.NodeName, "proxy/stats/summary").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("the kubelet's stats summary: %w", err)
	}
	var s summary
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("decode the kubelet's stats summary: %w", err)
	}
	mem, cpu := map[string][]float64{}, map[string][]float64{}
	for _, p := range s.Pods {
		rest, ok := strings.CutPrefix(p.PodRef.Name, "kfn-pool-")
		if p.PodRef.Namespace != ns || !ok || p.Memory == nil || p.Memory.WorkingSetBytes == nil || p.CPU == nil || p.CPU.UsageNanoCores == nil {
			continue
		}
		runtime := rest[:max(strings.LastIndex(rest, "-"), 0)]
		mem[runtime] = append(mem[runtime], float64(*p.Memory.WorkingSetBytes)/(1<<20))
		cpu[runtime] = append(cpu[runtime], float64(*p.CPU.UsageNanoCores)/1e6)
	}
	out := map[string]standbyCost{}
	for runtime, ms := range mem {
		out[runtime] = standbyCost{pods: len(ms), memoryMiB: middle(ms), cpuMillicores: middle(cpu[runtime])}
	}
	return out, nil
}

// middle is the median of xs (the upper one of an even count).
func middle(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
