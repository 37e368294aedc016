package singlenode

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LogSource is the pods whose log lines LogsSince reads: those of
// Namespace matching Selector (a label selector; empty: every pod), or
// the one pod Name when it is set, each line kept when Keep says so (nil:
// every line).
type LogSource struct {
	Namespace, Selector, Name string
	Keep                      func(line string) bool
}

// maxLogLine is how much of one log line LogsSince quotes.
const maxLogLine = 400

// LogsSince returns the lines the pods of sources logged from start on, in
// the order of the container runtime's timestamps (the node's clock, this
// machine's), each as its time since start in milliseconds, the pod's name
// and the line (cut at 400 characters): the platform's own account of a
// moment, such as a wake. A pod or log that cannot be read is a line that
// says so.
func (c *Cluster) LogsSince(ctx context.Context, start time.Time, sources ...LogSource) []string {
	type entry struct {
		at        time.Time
		who, text string
	}
	var entries []entry
	read := func(p corev1.Pod, keep func(string) bool) {
		since := metav1.NewTime(start.Add(-time.Second))
		out, err := c.Clientset.CoreV1().Pods(p.Namespace).GetLogs(p.Name,
			&corev1.PodLogOptions{Timestamps: true, SinceTime: &since}).DoRaw(ctx)
		if err != nil {
			entries = append(entries, entry{start, p.Name, "(its log: " + err.Error() + ")"})
			return
		}
		for _, l := range strings.Split(string(out), "\n") {
			stamp, text, ok := strings.Cut(l, " ")
			at, err := time.Parse(time.RFC3339Nano, stamp)
			if ok && err == nil && !at.Before(start) && (keep == nil || keep(text)) {
				entries = append(entries, entry{at, p.Name, text})
			}
		}
	}
	for _, s := range sources {
		if s.Name != "" {
			p, err := c.Clientset.CoreV1().Pods(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
			if err != nil {
				entries = append(entries, entry{start, s.Name, "(the pod: " + err.Error() + ")"})
				continue
			}
			read(*p, s.Keep)
			continue
		}
		pods, err := c.Clientset.CoreV1().Pods(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: s.Selector})
		if err != nil {
			entries = append(entries, entry{start, s.Namespace + "/" + s.Selector, "(its pods: " + err.Error() + ")"})
			continue
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				read(p, s.Keep)
			}
		}
	}
	slices.SortStableFunc(entries, func(a, b entry) int { return a.at.Compare(b.at) })
	lines := make([]string, 0, len(entries))
	for _, e := range entries {
		text := e.text
		if len(text) > maxLogLine {
			text = text[:maxLogLine] + "..."
		}
		lines = append(lines, fmt.Sprintf("  %+8.1f ms  %s: %s", float64(e.at.Sub(start).Microseconds())/1000, e.who, text))
	}
	return lines
}
