package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// publishFlags are the flags of kfn publish: the event and where to send it.
type publishFlags struct {
	target                             targetFlags
	typ, source, data, contentType, id string
	structured                         bool
}

func newPublishCommand() *cobra.Command {
	var f publishFlags
	cmd := &cobra.Command{
		Use:   "publish --type TYPE [--source SOURCE] [--data JSON]",
		Short: "Publish a CloudEvent to the kfn publisher",
		Long: `publish sends one CloudEvent to the publisher's /publish endpoint (kfn dev
serves it on --addr; in a cluster it is reached through a port-forward to
kfn's event bridge) and returns once it is stored. Every Subscription that
matches the event's source and type receives it.`,
		Example: `  kfn publish --type order.created.v1 --source shop --data '{"id": 42}'
  kfn publish --type ping.v1 --data hello --content-type text/plain`,
		Args: exactArgs(0, "no arguments (use --type, --source and --data)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			event, err := f.event()
			if err != nil {
				return err
			}
			if err := f.send(cmd, &event); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "published %s (type %s, source %s)\n", event.ID(), f.typ, f.source)
			return nil
		},
	}
	f.target.add(cmd)
	cmd.Flags().StringVar(&f.typ, "type", "", "event type, such as order.created.v1 (required)")
	cmd.Flags().StringVar(&f.source, "source", "kfn", "event source")
	cmd.Flags().StringVar(&f.data, "data", "", "event data")
	cmd.Flags().StringVar(&f.contentType, "content-type", "application/json", "content type of --data")
	cmd.Flags().StringVar(&f.id, "id", "", "event id (default: a new UUID); publishing the same source and id twice stores the event once")
	cmd.Flags().BoolVar(&f.structured, "structured", false, "send in structured mode (application/cloudevents+json) instead of binary mode")
	return cmd
}

// event is the CloudEvent the flags describe, or a usage error.
func (f *publishFlags) event() (cloudevents.Event, error) {
	if f.typ == "" {
		return cloudevents.Event{}, usagef("--type is required")
	}
	event := cloudevents.NewEvent()
	id := f.id
	if id == "" {
		id = uuid.NewString()
	}
	event.SetID(id)
	event.SetType(f.typ)
	event.SetSource(f.source)
	event.SetTime(time.Now())
	if f.data != "" {
		if strings.Contains(f.contentType, "json") && !json.Valid([]byte(f.data)) {
			return cloudevents.Event{}, usagef("--data is not valid JSON (for other data set --content-type, e.g. text/plain)")
		}
		if err := event.SetData(f.contentType, []byte(f.data)); err != nil {
			return cloudevents.Event{}, fmt.Errorf("set the event's data: %w", err)
		}
	}
	if err := event.Validate(); err != nil {
		return cloudevents.Event{}, usagef("invalid event: %v", err)
	}
	return event, nil
}

// send posts event to the publisher of the target, in binary mode or
// structured, and returns once the publisher has stored it.
func (f *publishFlags) send(cmd *cobra.Command, event *cloudevents.Event) error {
	ep, err := f.target.endpoints(cmd)
	if err != nil {
		return err
	}
	defer ep.close()
	req, err := http.NewRequestWithContext(cmd.Context(), http.MethodPost, ep.publisher+"/publish", nil)
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	msg := binding.ToMessage(event)
	ctx := cmd.Context()
	if f.structured {
		ctx = binding.WithForceStructured(ctx)
	} else {
		ctx = binding.WithForceBinary(ctx)
	}
	if err := cehttp.WriteRequest(ctx, msg, req); err != nil {
		return fmt.Errorf("encode the event: %w", err)
	}
	ep.authorize(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ep.unreachable("publish to", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64*1024))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("the publisher refused the event: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// bodyReader returns a reader for data, or nil when there is none.
func bodyReader(data string) io.Reader {
	if data == "" {
		return nil
	}
	return bytes.NewBufferString(data)
}
