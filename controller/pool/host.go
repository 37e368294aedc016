package pool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kfn-dev/kfn/controller/resources"
	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/runtimes/plan"
)

// podAddress is the pod's IP and its function container's port.
func podAddress(pod *corev1.Pod) string {
	port := int32(runtimes.DefaultPort)
	for _, c := range pod.Spec.Containers {
		if c.Name == resources.ContainerFunction && len(c.Ports) > 0 {
			port = c.Ports[0].ContainerPort
		}
	}
	return net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(port)))
}

// maxAnswerHeaderBytes bounds the headers of a host's answer to
// specialize: a few (runtimes.FunctionHeader) from a host that runs a
// tenant's code once loaded; one with more fails the claim, rather than be
// read up to Go's 10 MiB by the controller every tenant shares.
const maxAnswerHeaderBytes = 16 << 10

// hostTransport is the transport to standby hosts: no proxy from the
// environment, and answers with at most maxAnswerHeaderBytes of headers.
func hostTransport() *http.Transport {
	return &http.Transport{
		DialContext:            (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost:    1,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: maxAnswerHeaderBytes,
	}
}

// specialize sends fn's source and environment to pod's host.
func (p *Pool) specialize(ctx context.Context, pod *corev1.Pod, fn plan.Plan) error {
	body, err := json.Marshal(Specialization(fn))
	if err != nil {
		return fmt.Errorf("encode the specialization: %w", err)
	}
	url := "http://" + p.address(pod) + runtimes.SpecializePath
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("specialize %s: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+p.token(pod.Namespace, pod.Name))
	resp, err := p.http.Do(req)
	if err != nil {
		return fmt.Errorf("specialize %s: %w", url, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("specialize %s: %w", url, &hostAnswer{status: resp.StatusCode, text: string(answer)})
	}
	// A host that already serves a Function answers the path as that
	// Function's: only its own name says this one was loaded.
	if want := fn.Namespace + "/" + fn.Name; resp.Header.Get(runtimes.FunctionHeader) != want {
		return fmt.Errorf("specialize %s: the host serves %q, not %s", url, resp.Header.Get(runtimes.FunctionHeader), want)
	}
	return nil
}

// hostAnswer is a standby host's refusal of a Function: its status and
// the reason it gives.
type hostAnswer struct {
	status int
	text   string
}

func (a *hostAnswer) Error() string {
	return fmt.Sprintf("the standby host answered %d: %s", a.status, strings.TrimSpace(a.text))
}

// prepareHost asks pod's host to fetch the dependency set prep names
// before any Function is given to it (runtimes.Preparation).
func (p *Pool) prepareHost(ctx context.Context, pod *corev1.Pod, prep runtimes.Preparation) error {
	body, err := json.Marshal(prep)
	if err != nil {
		return fmt.Errorf("encode the preparation: %w", err)
	}
	url := "http://" + p.address(pod) + runtimes.PreparePath
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("prepare %s: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+p.token(pod.Namespace, pod.Name))
	resp, err := p.http.Do(req)
	if err != nil {
		return fmt.Errorf("prepare %s: %w", url, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("prepare %s: %w", url, &hostAnswer{status: resp.StatusCode, text: string(answer)})
	}
	return nil
}
