package dev

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kfn-dev/kfn/api/eventing/v1alpha2"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/deadletter"
	"github.com/kfn-dev/kfn/eventbridge/eventpath"
	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/internal/scrape"
	"github.com/kfn-dev/kfn/local/devstatus"
)

// AdminPrefix is the path prefix of kfn dev's own API. It is not a valid
// namespace name, so it never collides with the gateway's /{namespace}/{function}.
// The event bridge's dead-letter API answers under it too.
const AdminPrefix = deadletter.PathPrefix

// Status is what `kfn get` and the web view show of a running kfn dev.
type Status = devstatus.Status

// FunctionStatus is one function's state.
type FunctionStatus = devstatus.Function

// SubscriptionStatus is one Subscription's state and delivery counts.
type SubscriptionStatus = devstatus.Subscription

// Status returns the platform's current state.
func (p *Platform) Status() Status {
	p.mu.Lock()
	st := Status{Ready: p.ready, Addr: p.addr, NATS: p.broker.URL(), Errors: append([]string(nil), p.errors...)}
	notReady := make(map[string]FunctionStatus, len(p.notReady))
	for _, f := range p.notReady {
		notReady[f.Namespace+"/"+f.Name] = f
	}
	p.mu.Unlock()
	served := p.subscriptions.Subscriptions()
	subs := make([]SubscriptionStatus, 0, len(served))
	for _, s := range served {
		subs = append(subs, SubscriptionStatus{Namespace: s.Namespace, Name: s.Name, Sink: s.Spec.Sink, Source: s.Spec.Source, Types: s.Spec.Types, CleanTypes: s.CleanTypes()})
	}

	routes := routesByFunction(p.bridge.Gateway.Routes())
	for _, f := range p.runner.Functions() {
		fs := FunctionStatus{
			Namespace: f.Plan.Namespace, Name: f.Plan.Name, Runtime: f.Plan.Runtime.Name,
			Replicas: f.Pool.Replicas(), Ready: len(f.Pool.Endpoints()),
			Autoscaled: f.Plan.Scaling.Autoscaled, Min: int(f.Plan.Scaling.MinReplicas), Max: int(f.Plan.Scaling.MaxReplicas),
			Warnings: f.Warnings,
		}
		fs.Routes = routes[types.NamespacedName{Namespace: fs.Namespace, Name: fs.Name}]
		if err := f.Error(); err != nil {
			fs.Error = err.Error()
		}
		if nr, ok := notReady[fs.Namespace+"/"+fs.Name]; ok {
			// Edited into a Function that cannot run: the earlier
			// version keeps running, and the condition says why the edit
			// is not.
			fs.Error = nr.Error
			delete(notReady, fs.Namespace+"/"+fs.Name)
		}
		if s, err := p.scaler.Core.State(types.NamespacedName{Namespace: fs.Namespace, Name: fs.Name}); err == nil {
			fs.Backlog, fs.InFlight, fs.Active = s.Backlog, s.InFlight, s.Active
		}
		st.Functions = append(st.Functions, fs)
	}
	for _, f := range notReady {
		st.Functions = append(st.Functions, f)
	}
	sort.SliceStable(st.Functions, func(i, j int) bool {
		return st.Functions[i].Namespace+"/"+st.Functions[i].Name < st.Functions[j].Namespace+"/"+st.Functions[j].Name
	})

	backlogs, err := p.backlogs()
	for i := range subs {
		s := &subs[i]
		c, served := p.bridge.Dispatcher.Counts(s.Namespace, s.Name)
		s.Ready = served
		s.Delivered, s.Failed, s.DeadLettered = c.Delivered, c.Failed, c.DeadLettered
		if err == nil {
			s.Backlog = backlogs[stream.ConsumerName(s.Namespace, s.Name)]
		}
	}
	sort.Slice(subs, func(i, j int) bool { return subs[i].Namespace+"/"+subs[i].Name < subs[j].Namespace+"/"+subs[j].Name })
	st.Subscriptions = subs
	return st
}

// backlogs reads the backlog of every Subscription's consumer, by consumer
// name, in one request to JetStream.
func (p *Platform) backlogs() (map[string]uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return p.backlogReader.Backlogs(ctx)
}

// handler routes kfn dev's single port: the publisher's endpoints, the
// admin API and the web view (ViewPath) under /_kfn, and everything else
// to the gateway.
func (p *Platform) handler() http.Handler {
	admin := http.NewServeMux()
	admin.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(p.Status())
	})
	admin.HandleFunc("GET /logs/{namespace}/{name}", p.serveLogs)
	admin.HandleFunc("GET /events/{id}", p.serveEventPath)
	admin.Handle("GET /metrics", scrape.Handler(p.registry, p.log))
	h := p.bridge.Handlers()
	dl := h.DeadLetters
	admin.Handle("/deadletters", dl)
	admin.Handle("/deadletters/", dl)
	admin.Handle(viewRoute, http.StripPrefix(strings.TrimSuffix(viewRoute, "/"), p.view.Handler()))
	admin.HandleFunc("GET /{$}", redirectToView)

	mux := http.NewServeMux()
	for _, pattern := range publisher.Routes() {
		mux.Handle(pattern, h.Publisher)
	}
	mux.Handle("/", p.events.Calls(h.Gateway, p.route))
	adminHandler := guardAdmin(http.StripPrefix(AdminPrefix, admin))
	events := guardEvents(mux)
	rest := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, AdminPrefix+"/") {
			adminHandler.ServeHTTP(w, r)
			return
		}
		if r.URL.Path == AdminPrefix && r.Method == http.MethodGet {
			redirectToView(w, r)
			return
		}
		events.ServeHTTP(w, r)
	})
	// The hosts of the project's APIRules are served by their rules only
	// (one match of the request's host), whose access strategy decides who
	// may call, as on a cluster's listener of their own: never by the
	// publisher, the admin API or the gateway's own routing; the other
	// hosts go on to those, behind their guards. No page of another site
	// writes through either.
	return guardWrites(p.bridge.Gateway.Exposed(rest))
}

// EventPath is the answer of GET AdminPrefix/events/{id}: the chains
// (eventpath.Chain) that hold the events of that CloudEvents id (and of
// the source the query's source names, when it does).
type EventPath struct {
	Chains []eventpath.Chain `json:"chains"`
}

// serveEventPath answers the path of the events of one id (kfn trace): 404
// when kfn dev holds none (never seen, or older than the events it keeps),
// 400 for an id or source longer than an event's may be.
func (p *Platform) serveEventPath(w http.ResponseWriter, r *http.Request) {
	id, source := r.PathValue("id"), r.URL.Query().Get("source")
	if len(id) > eventstore.MaxIDLength || len(source) > v1alpha2.MaxEventSourceLength {
		http.Error(w, fmt.Sprintf("an event id is at most %d bytes and a source %d", eventstore.MaxIDLength, v1alpha2.MaxEventSourceLength), http.StatusBadRequest)
		return
	}
	chains := p.events.Find(id, source)
	if len(chains) == 0 {
		what := fmt.Sprintf("%q", id)
		if source != "" {
			what += fmt.Sprintf(" of source %q", source)
		}
		http.Error(w, fmt.Sprintf("no event %s among the %d most recent events kfn dev keeps", what, p.events.Bound()), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(EventPath{Chains: chains})
}

// serveLogs writes a function's kept output lines, and with ?follow=1
// keeps streaming new ones until the client leaves.
func (p *Platform) serveLogs(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("namespace") + "/" + r.PathValue("name")
	if p.runner.Get(r.PathValue("namespace"), r.PathValue("name")) == nil {
		http.Error(w, fmt.Sprintf("no function %s: 'kfn get' lists them", key), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if r.URL.Query().Get("follow") == "" {
		for _, line := range p.logs.Lines(key) {
			fmt.Fprintln(w, line)
		}
		return
	}
	past, next, stop := p.logs.Follow(key)
	defer stop()
	bw := bufio.NewWriter(w)
	flusher, _ := w.(http.Flusher)
	for _, line := range past {
		fmt.Fprintln(bw, line)
	}
	for {
		_ = bw.Flush()
		if flusher != nil {
			flusher.Flush()
		}
		select {
		case <-r.Context().Done():
			return
		case line := <-next:
			fmt.Fprintln(bw, line)
		case <-time.After(30 * time.Second):
			// keep idle connections through proxies alive: nothing to send
		}
	}
}

// PIDs returns the process ids of namespace/name's processes.
func (p *Platform) PIDs(namespace, name string) []int {
	f := p.runner.Get(namespace, name)
	if f == nil {
		return nil
	}
	return f.Pool.PIDs()
}
