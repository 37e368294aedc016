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
	header, err := p.post(ctx, p.http, pod, "specialize", runtimes.SpecializePath, Specialization(fn))
	if err != nil {
		return err
	}
	// A host that already serves a Function answers the path as that
	// Function's: only its own name says this one was loaded.
	if want := fn.Namespace + "/" + fn.Name; header.Get(runtimes.FunctionHeader) != want {
		return fmt.Errorf("specialize %s: the host serves %q, not %s", p.address(pod), header.Get(runtimes.FunctionHeader), want)
	}
	return nil
}

// prepareHost asks pod's host to fetch the dependency set prep names
// before any Function is given to it (runtimes.Preparation).
func (p *Pool) prepareHost(ctx context.Context, pod *corev1.Pod, prep runtimes.Preparation) error {
	_, err := p.post(ctx, p.prepareHTTP, pod, "prepare", runtimes.PreparePath, prep)
	return err
}

// post sends v as JSON with hc to path of pod's host with the pod's
// standby token, and returns the headers of its 200 answer; any other
// answer is a *hostAnswer error. what names the request in errors.
func (p *Pool) post(ctx context.Context, hc *http.Client, pod *corev1.Pod, what, path string, v any) (http.Header, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode the %s request: %w", what, err)
	}
	url := "http://" + p.address(pod) + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+p.token(pod.Namespace, pod.Name))
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, url, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %w", what, url, &hostAnswer{status: resp.StatusCode, text: string(answer)})
	}
	return resp.Header, nil
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
