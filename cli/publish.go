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

func newPublishCommand() *cobra.Command {
	var (
		target                             targetFlags
		typ, source, data, contentType, id string
		structured                         bool
	)
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
			if typ == "" {
				return usagef("--type is required")
			}
			event := cloudevents.NewEvent()
			if id == "" {
				id = uuid.NewString()
			}
			event.SetID(id)
			event.SetType(typ)
			event.SetSource(source)
			event.SetTime(time.Now())
			if data != "" {
				if strings.Contains(contentType, "json") && !json.Valid([]byte(data)) {
					return usagef("--data is not valid JSON (for other data set --content-type, e.g. text/plain)")
				}
				if err := event.SetData(contentType, []byte(data)); err != nil {
					return fmt.Errorf("set the event's data: %w", err)
				}
			}
			if err := event.Validate(); err != nil {
				return usagef("invalid event: %v", err)
			}
			ep, err := target.endpoints(cmd)
			if err != nil {
				return err
			}
			defer ep.close()
			req, err := http.NewRequestWithContext(cmd.Context(), http.MethodPost, ep.publisher+"/publish", nil)
			if err != nil {
				return fmt.Errorf("publish: %w", err)
			}
			msg := binding.ToMessage(&event)
			ctx := cmd.Context()
			if structured {
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
			fmt.Fprintf(cmd.OutOrStdout(), "published %s (type %s, source %s)\n", id, typ, source)
			return nil
		},
	}
	target.add(cmd)
	cmd.Flags().StringVar(&typ, "type", "", "event type, such as order.created.v1 (required)")
	cmd.Flags().StringVar(&source, "source", "kfn", "event source")
	cmd.Flags().StringVar(&data, "data", "", "event data")
	cmd.Flags().StringVar(&contentType, "content-type", "application/json", "content type of --data")
	cmd.Flags().StringVar(&id, "id", "", "event id (default: a new UUID); publishing the same source and id twice stores the event once")
	cmd.Flags().BoolVar(&structured, "structured", false, "send in structured mode (application/cloudevents+json) instead of binary mode")
	return cmd
}

// bodyReader returns a reader for data, or nil when there is none.
func bodyReader(data string) io.Reader {
	if data == "" {
		return nil
	}
	return bytes.NewBufferString(data)
}
