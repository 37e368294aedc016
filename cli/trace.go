package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/kfn-dev/kfn/eventbridge/eventpath"
)

// maxEventPathBytes bounds the answer kfn trace reads: a chain of the
// 1,000 events kfn dev keeps, each with its deliveries and attempts.
const maxEventPathBytes = 64 << 20

func newTraceCommand() *cobra.Command {
	var (
		target                    targetFlags
		source, output, namespace string
	)
	cmd := &cobra.Command{
		Use:   "trace EVENT-ID",
		Short: "Print an event's path: its deliveries, each attempt, and the events that followed",
		Long: `trace prints the chain that holds the event of EVENT-ID (of --source, when
ids repeat across sources) in a running kfn dev: the event the chain started
with, each Subscription it was delivered to (the function, the outcome, the
status of each attempt), the events the function emitted or replied with and
where those went in turn, and replays from the dead-letter stream. The event
asked for is marked. kfn dev keeps the 1,000 most recent events.

On a cluster, trace asks the event bridge (through a port-forward, with your
kubeconfig's credentials) for the path of the event in namespace -n (the
context's by default), which RBAC must let you read (subscriptions/events,
in the view role): the events that namespace's senders published and the
deliveries to its own Subscriptions, never another namespace's. The event
bridge keeps the 250 most recent events of each namespace (-event-paths);
the replica trace reaches asks the others for theirs.`,
		Example: `  kfn publish --type order.created.v1 --source shop --id order-1 --data '{"id": "1"}'
  kfn trace order-1
  kfn trace order-1 -n shop --kubeconfig ~/.kube/config   # on a cluster`,
		Args: exactArgs(1, "the EVENT-ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			q := url.Values{}
			if source != "" {
				q.Set("source", source)
			}
			ns := ""
			if target.inCluster(cmd) {
				ns = target.namespace(cmd, namespace)
				q.Set("namespace", ns)
			}
			ep, err := target.endpoints(cmd)
			if err != nil {
				return err
			}
			defer ep.close()
			path := "/events/" + url.PathEscape(args[0])
			if len(q) > 0 {
				path += "?" + q.Encode()
			}
			resp, err := adminDo(cmd, ep, "GET", path)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			var found eventpath.Found
			if err := json.NewDecoder(io.LimitReader(resp.Body, maxEventPathBytes)).Decode(&found); err != nil {
				return fmt.Errorf("read the event's path: %w", err)
			}
			if output != outputTable {
				return printObject(cmd.OutOrStdout(), output, found)
			}
			return printEventPath(cmd.OutOrStdout(), found.Chains, args[0], source, ns)
		},
	}
	target.add(cmd)
	cmd.Flags().StringVar(&source, "source", "", "the event's source, when events of several sources have the id")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "in a cluster, the namespace whose record to read (the context's by default); kfn dev shows every namespace's")
	outputFlag(cmd, &output)
	return cmd
}

// printEventPath writes the chains as indented trees, the events of id
// (and source) marked; namespace, when set, is the one namespace whose
// deliveries the chains show (a cluster's record).
func printEventPath(w io.Writer, chains []eventpath.Chain, id, source, namespace string) error {
	p := pathPrinter{w: w, id: id, source: source, namespace: namespace}
	for i, c := range chains {
		if i > 0 {
			p.line(0, "")
		}
		if c.TraceID != "" {
			p.line(0, "chain of trace %s", c.TraceID)
		} else {
			p.line(0, "chain (no trace context)")
		}
		for _, e := range c.Events {
			p.event(1, e)
		}
	}
	return p.err
}

// pathPrinter writes one chain's lines, keeping the first write error.
type pathPrinter struct {
	w                     io.Writer
	id, source, namespace string
	err                   error
}

func (p *pathPrinter) line(depth int, format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, "%s%s\n", strings.Repeat("  ", depth), fmt.Sprintf(format, args...))
	}
}

// event writes e, its deliveries (each with the events that followed from
// it) and its replays.
func (p *pathPrinter) event(depth int, e *eventpath.Event) {
	how := string(e.Origin)
	if e.Call != nil {
		how = fmt.Sprintf("emitted by %s for %s", printable(e.Call.Function), printable(e.Call.Request))
	}
	what := fmt.Sprintf("%s %s (%s from %s", how, printable(e.ID), printable(e.Type), printable(e.Source))
	if e.Sequence != 0 {
		what += fmt.Sprintf(", stream sequence %d", e.Sequence)
	}
	if !e.Stored.IsZero() {
		what += ", stored " + e.Stored.Local().Format("15:04:05.000")
	}
	what += ")"
	if e.Is(p.id, p.source) {
		what += "  <- this event"
	}
	p.line(depth, "%s", what)
	if len(e.Deliveries) == 0 {
		if p.namespace != "" {
			p.line(depth+1, "-> no Subscription of namespace %s took it (other namespaces' are not shown)", printable(p.namespace))
		} else {
			p.line(depth+1, "-> no Subscription took it")
		}
	}
	for _, d := range e.Deliveries {
		p.delivery(depth+1, d)
		for _, x := range d.Emitted {
			p.event(depth+2, x)
		}
	}
	for _, x := range e.Replays {
		p.event(depth+1, x)
	}
}

// delivery writes one Subscription's delivery: where, the outcome, each
// attempt's status and time, and the reason of the last failure.
func (p *pathPrinter) delivery(depth int, d *eventpath.Delivery) {
	sub := d.Namespace + "/" + d.Subscription
	if d.Subscription == "" {
		sub = "a Subscription"
	}
	outcome := string(d.Outcome)
	if outcome == "" {
		outcome = "first attempt under way"
	}
	attempts := make([]string, 0, len(d.Steps))
	for _, s := range d.Steps {
		status := "network error"
		if s.Status != 0 {
			status = strconv.Itoa(s.Status)
		}
		attempts = append(attempts, fmt.Sprintf("#%d %s in %s", s.Number, status, s.Duration.Round(time.Millisecond/10)))
	}
	line := fmt.Sprintf("-> %s at %s: %s", printable(sub), printable(d.Function), outcome)
	if d.Attempts > 0 {
		line += fmt.Sprintf(" after %d attempt%s [%s]", d.Attempts, plural(d.Attempts), strings.Join(attempts, ", "))
	}
	p.line(depth, "%s", line)
	if d.Reason != "" {
		p.line(depth+1, "reason: %s", printable(d.Reason))
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// printable is s as it can go to a terminal: quoted (Go's escapes) when
// it holds anything but printable characters, so that an event's id, type
// or source, which any publisher chooses, cannot move the cursor or
// change the terminal; cut at 200 characters.
func printable(s string) string {
	if utf8.RuneCountInString(s) > 200 {
		s = string([]rune(s)[:200]) + "..."
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}
