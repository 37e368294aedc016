package singlenode

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// logTailLines is how much of each container's log Describe quotes.
const logTailLines = 40

// DumpBegin and DumpEnd are Describe's first and last lines: a report of
// the tests' output (hack/testsummary) leaves out what is between them
// when it repeats a failed test's messages at the end of a run.
const (
	DumpBegin = "<<<<< platform dump begins"
	DumpEnd   = ">>>>> platform dump ends"
)

// Describe returns what a failed test needs to see of the namespaces: each
// pod's phase, conditions and containers (state, restarts, last
// termination), the namespaces' recent events, and the last lines of every
// container's log (and of its previous run, after a restart), between
// the lines DumpBegin and DumpEnd. Errors reading any of it are part of
// the text.
func (c *Cluster) Describe(ctx context.Context, namespaces ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s)\n", DumpBegin, strings.Join(namespaces, ", "))
	for _, ns := range namespaces {
		fmt.Fprintf(&b, "=== namespace %s\n", ns)
		pods, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			fmt.Fprintf(&b, "list pods: %v\n", err)
		} else {
			for i := range pods.Items {
				c.describePod(ctx, &b, &pods.Items[i])
			}
		}
		events, err := c.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			fmt.Fprintf(&b, "list events: %v\n", err)
			continue
		}
		items := events.Items
		sort.Slice(items, func(i, j int) bool { return eventTime(items[i]).Time.Before(eventTime(items[j]).Time) })
		if len(items) > 30 {
			items = items[len(items)-30:]
		}
		fmt.Fprintf(&b, "--- events (last %d)\n", len(items))
		for _, e := range items {
			fmt.Fprintf(&b, "%s %s %s/%s %s: %s\n", eventTime(e).Format("15:04:05"), e.Type,
				e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, strings.TrimSpace(e.Message))
		}
	}
	fmt.Fprintf(&b, "%s\n", DumpEnd)
	return b.String()
}

func eventTime(e corev1.Event) metav1.Time {
	if !e.LastTimestamp.IsZero() {
		return e.LastTimestamp
	}
	if !e.EventTime.IsZero() {
		return metav1.Time{Time: e.EventTime.Time}
	}
	return e.CreationTimestamp
}

func (c *Cluster) describePod(ctx context.Context, b *strings.Builder, p *corev1.Pod) {
	fmt.Fprintf(b, "--- pod %s: %s ip=%s", p.Name, p.Status.Phase, p.Status.PodIP)
	if p.Status.Reason != "" {
		fmt.Fprintf(b, " reason=%s %s", p.Status.Reason, p.Status.Message)
	}
	b.WriteString("\n")
	for _, cond := range p.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			fmt.Fprintf(b, "    condition %s=%s %s %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
	}
	statuses := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, s := range statuses {
		fmt.Fprintf(b, "    container %s ready=%t restarts=%d %s\n", s.Name, s.Ready, s.RestartCount, containerState(s.State))
		if t := s.LastTerminationState.Terminated; t != nil {
			fmt.Fprintf(b, "      last: exit %d %s %s\n", t.ExitCode, t.Reason, strings.TrimSpace(t.Message))
		}
		c.quoteLog(ctx, b, p, s.Name, false)
		if s.RestartCount > 0 {
			c.quoteLog(ctx, b, p, s.Name, true)
		}
	}
}

func containerState(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running since " + s.Running.StartedAt.Format("15:04:05")
	case s.Waiting != nil:
		return "waiting: " + s.Waiting.Reason + " " + s.Waiting.Message
	case s.Terminated != nil:
		return fmt.Sprintf("terminated: exit %d %s %s", s.Terminated.ExitCode, s.Terminated.Reason, s.Terminated.Message)
	}
	return "no state"
}

func (c *Cluster) quoteLog(ctx context.Context, b *strings.Builder, p *corev1.Pod, container string, previous bool) {
	lines := int64(logTailLines)
	data, err := c.Clientset.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{
		Container: container, TailLines: &lines, Previous: previous,
	}).DoRaw(ctx)
	which := "log"
	if previous {
		which = "previous log"
	}
	if err != nil {
		fmt.Fprintf(b, "      (%s: %v)\n", which, err)
		return
	}
	text := strings.TrimRight(string(data), "\n")
	if text == "" {
		return
	}
	fmt.Fprintf(b, "      %s:\n", which)
	for _, l := range strings.Split(text, "\n") {
		fmt.Fprintf(b, "        %s\n", l)
	}
}
