package jsstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/contract/stream"
)

// SpreadLeaders asks JetStream to move the leaders of the partitions'
// streams onto different servers, so that each server leads its share of
// the partitions (the leader takes every store and acknowledgement of its
// stream): of the servers that hold the partitions' replicas, by name,
// partition p is led by the (p mod servers)-th, when that server holds a
// current replica of it. It returns how many leaders it asked to move; a
// leader moves once its stream's group agrees, so the next call may ask
// again for one still moving. Streams of one replica (their leader is
// where they are placed), a partition without a leader yet and a single
// server are left as they are. Call it again after servers restart: NATS
// elects leaders anew without regard to the others.
func SpreadLeaders(ctx context.Context, js jetstream.JetStream, c stream.Config) (int, error) {
	if c.Replicas < 2 || c.PartitionCount() < 2 {
		return 0, nil
	}
	clusters := make([]*jetstream.ClusterInfo, c.PartitionCount())
	var servers []string
	for p, name := range c.PartitionStreams() {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return 0, fmt.Errorf("look up stream %s: %w", name, err)
		}
		ci := s.CachedInfo().Cluster
		if ci == nil || ci.Leader == "" {
			continue
		}
		clusters[p] = ci
		servers = append(servers, ci.Leader)
		for _, r := range ci.Replicas {
			servers = append(servers, r.Name)
		}
	}
	slices.Sort(servers)
	servers = slices.Compact(servers)
	if len(servers) < 2 {
		return 0, nil
	}
	moved := 0
	var errs []error
	for p, ci := range clusters {
		if ci == nil {
			continue
		}
		want := servers[p%len(servers)]
		if ci.Leader == want || !slices.ContainsFunc(ci.Replicas, func(r *jetstream.PeerInfo) bool {
			return r.Name == want && r.Current && !r.Offline
		}) {
			continue
		}
		if err := MoveLeader(ctx, js, c.PartitionStream(p), want); err != nil {
			errs = append(errs, err)
			continue
		}
		moved++
	}
	return moved, errors.Join(errs...)
}

// MoveLeader asks the leader of the named stream to hand its leadership
// to the server named preferred (JetStream's stream leader step-down, with
// a preferred placement, NATS 2.11 and later); the stream's group elects
// it a moment later. An election under way, or preferred already leading,
// is an error. Only the stream's leader answers: a server that lost its
// leadership meanwhile, or one too busy to take the request, answers
// nothing, and a ctx without a deadline is given js's default timeout, as
// the client library gives its own API requests.
func MoveLeader(ctx context.Context, js jetstream.JetStream, name, preferred string) error {
	req, err := json.Marshal(map[string]any{"placement": map[string]string{"preferred": preferred}})
	if err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, js.Options().DefaultTimeout)
		defer cancel()
	}
	msg, err := js.Conn().RequestWithContext(ctx, apiPrefix(js)+"STREAM.LEADER.STEPDOWN."+name, req)
	if err != nil {
		return fmt.Errorf("move the leader of stream %s to %s: %w", name, preferred, err)
	}
	var resp struct {
		Success bool `json:"success"`
		Error   *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return fmt.Errorf("move the leader of stream %s to %s: answer: %w", name, preferred, err)
	}
	if resp.Error != nil || !resp.Success {
		description := "refused"
		if resp.Error != nil {
			description = resp.Error.Description
		}
		return fmt.Errorf("move the leader of stream %s to %s: %s", name, preferred, description)
	}
	return nil
}

// apiPrefix is the subject prefix of js's JetStream API requests.
func apiPrefix(js jetstream.JetStream) string {
	o := js.Options()
	switch {
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "." // kept as given; the library adds the dot
	}
	return jetstream.DefaultAPIPrefix
}
