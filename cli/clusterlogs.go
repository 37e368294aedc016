package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	serverlessv1alpha2 "github.com/kfn-dev/kfn/api/serverless/v1alpha2"
)

// logTail is how many lines of each pod logs prints first, as kfn dev
// keeps at most 1,000.
const logTail = 1000

// logs prints the function container's output of every pod of Function
// ns/name, each line prefixed with the pod. With follow it keeps printing,
// and picks up pods that start later (a scale from zero), until ctx ends.
func (c *cluster) logs(ctx context.Context, out io.Writer, ns, name string, follow bool) error {
	var fn serverlessv1alpha2.Function
	if err := c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &fn); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("function %s/%s: %w in %s", ns, name, errNoFunction, c.where)
		}
		return fmt.Errorf("read function %s/%s: %w", ns, name, err)
	}
	w := &lineWriter{w: out}
	var (
		wg      sync.WaitGroup
		started = map[string]bool{}
		errs    = make(chan error, 16)
	)
	defer wg.Wait()
	for {
		pods, err := c.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: serverlessv1alpha2.LabelFunctionName + "=" + name})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("list the pods of %s/%s: %w", ns, name, err)
		}
		for _, p := range pods.Items {
			if started[p.Name] || !containerStarted(&p) {
				continue
			}
			started[p.Name] = true
			wg.Add(1)
			go func(pod string) {
				defer wg.Done()
				if err := c.streamLog(ctx, w, ns, pod, follow); err != nil && ctx.Err() == nil {
					select {
					case errs <- err:
					default:
					}
				}
			}(p.Name)
		}
		if !follow {
			wg.Wait()
			if len(started) == 0 {
				fmt.Fprintf(out, "(%s/%s has no running pod: it is scaled to zero or starting)\n", ns, name)
			}
			select {
			case err := <-errs:
				return err
			default:
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-errs:
			return err
		case <-time.After(time.Second):
		}
	}
}

// containerStarted reports whether the pod's function container has run.
func containerStarted(p *corev1.Pod) bool {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == "function" && (s.State.Running != nil || s.State.Terminated != nil || s.LastTerminationState.Terminated != nil) {
			return true
		}
	}
	return false
}

// streamLog copies one pod's function container log to w, line by line.
func (c *cluster) streamLog(ctx context.Context, w *lineWriter, ns, pod string, follow bool) error {
	tail := int64(logTail)
	rc, err := c.cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: "function", Follow: follow, TailLines: &tail}).Stream(ctx)
	if err != nil {
		return fmt.Errorf("logs of %s: %w", pod, err)
	}
	defer rc.Close()
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		w.line(pod, sc.Text())
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("logs of %s: %w", pod, err)
	}
	return nil
}

// lineWriter writes whole lines of several pods without interleaving them.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) line(pod, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "%s | %s\n", pod, text)
}
