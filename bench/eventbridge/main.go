// Command eventbridge-bench measures the event bridge against a bare
// pipeline in the same run, on the same machine: 1 KiB CloudEvents, HTTP
// publish -> JetStream (file storage) -> HTTP delivery to a Go sink, with the
// load generator in the same process.
//
// The bare pipeline does only HTTP -> js.Publish -> pull consumer -> HTTP
// POST, with no parsing, validation, matching, retries or metrics: the
// physical limit of this machine for the same hops. The figures that count
// are the ratios.
//
// With -observability it measures instead what metrics and traces cost:
// the same kfn pipeline with Prometheus metrics (scraped every second) and
// OpenTelemetry spans (every span sampled, a batch processor exporting to
// a discarding exporter) beside the pipeline without them, each on a NATS
// server of its own (kfn's subjects are fixed), measured in turns as below.
//
// A second anchor, the bare CloudEvents pipeline ("bare-ce"), is the bare
// pipeline carrying what any CloudEvents bridge must: the load generator
// sends binary-mode CloudEvents, the events are stored with their ce-*
// headers and their source and id as JetStream message id (so that a
// retried publish is stored once), and they are delivered with those
// headers. It is the bound that JetStream and HTTP set for kfn's stored
// form on this machine; kfn against it is what kfn's own code costs.
//
// With -subscriptions N the events are spread over N event types, one
// Subscription each, and the bare pipeline has N consumers too, one per
// subject: what JetStream costs per consumer (with interest retention, every
// acknowledgement asks each consumer of the stream whether it still needs
// the event) is in both, and the ratio shows what kfn adds.
//
// Three more bare pipelines, named in -pipelines, split what the
// CloudEvents form costs: bare-ce-http (binary-mode CloudEvents over HTTP,
// the event's data alone stored), bare-ce-noid (their headers stored too,
// without a message id) and bare-ce-packed (as bare-ce, the attributes
// stored as one header).
//
// With -ordered N it measures instead what ordering per key costs: kfn
// delivering the events of N partition keys in order against kfn
// delivering the same events unordered (ordered.go).
//
// With -stream-replicas it measures instead what replicated streams cost:
// kfn with R3 streams on a cluster of 3 NATS servers (the chart's profile
// ha) against kfn with R1 streams on one server (profile small), publish
// and delivery throughput and p99 (streamreplicas.go).
//
// Throughput is measured in turns: each pipeline publishes at full load
// for -slice, then the next, the order rotating, until each has had
// -duration; the machine's other load, which changes over seconds, then
// falls on all of them alike. Latency follows, in turns too. A pipeline's
// figures are those of all its turns in all rounds.
//
//	go run ./bench/eventbridge [-duration 5s] [-slice 1s] [-connections 64] [-inflight 256] [-rate 1000] [-subscriptions 1] [-observability] [-stream-replicas] [-ordered 1000]
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/bench/figures"
	"github.com/kfn-dev/kfn/bench/procstat"
	"github.com/kfn-dev/kfn/contract/stream"
	"github.com/kfn-dev/kfn/eventbridge/dispatcher"
	"github.com/kfn-dev/kfn/eventbridge/publisher"
	"github.com/kfn-dev/kfn/internal/egress"
)

type options struct {
	duration    time.Duration
	connections int
	inflight    int
	rate        int
	size        int
	rounds      int
	figures     string
	subs        int
	observe     string
	sample      float64
	replicas    bool
	r3          bool
	idle        bool
	hostile     bool
	natsProcess bool
	apart       bool
	attacks     string
	pipelines   string
	slice       time.Duration
	// keys is -ordered's number of partition keys; ordering makes the
	// kfn pipeline's Subscriptions ordered by them (ordered.go).
	keys     int
	ordering bool
	// partitions is -partitions: -stream-replicas also measures R3 streams
	// of this many partitions.
	partitions int
}

func main() {
	var o options
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "length of each throughput and latency phase")
	flag.IntVar(&o.connections, "connections", 64, "concurrent publishing connections in the throughput phase")
	flag.IntVar(&o.inflight, "inflight", 256, "events in flight to the sink (maxInFlightMessages; the bare pipeline's workers)")
	flag.IntVar(&o.rate, "rate", 1000, "events/s of the latency phase")
	flag.IntVar(&o.size, "size", 1024, "event data size in bytes")
	flag.IntVar(&o.rounds, "rounds", 2, "rounds of turns of the pipelines, each starting with another; every round counts")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	memprofile := flag.String("memprofile", "", "write a profile of the memory allocated during the whole run to this file")
	mutexprofile := flag.String("mutexprofile", "", "write a profile of the lock contention of the whole run to this file (every contention event recorded: the run is slower)")
	flag.IntVar(&o.subs, "subscriptions", 1, "Subscriptions of the kfn pipeline, one event type each; events are spread over them")
	flag.StringVar(&o.figures, "figures", "", "also append the results as JSON lines (package bench/figures) to this file")
	flag.StringVar(&o.observe, "observability", "", "measure kfn with metrics and traces (both), or only metrics or traces, or recording the events' paths (paths, as kfn trace reads them in a cluster), against kfn without them, instead of kfn against the bare pipeline")
	flag.Float64Var(&o.sample, "sample", 1, "with -observability: the fraction of traces sampled (OTEL_TRACES_SAMPLER=parentbased_traceidratio below 1)")
	flag.BoolVar(&o.replicas, "replicas", false, "measure instead the throughput of kfn with 2 dispatcher processes beside 1 (median of the rounds)")
	flag.BoolVar(&o.r3, "stream-replicas", false, "measure instead kfn with R3 streams on a 3-server NATS cluster (embedded, one process) against R1 streams on one server: publish and delivery throughput and p99")
	flag.IntVar(&o.partitions, "partitions", 3, "with -stream-replicas: also measure R3 streams of this many partitions (each led by another server) against R3 streams of one, and each server's share of the messages (1: not)")
	flag.BoolVar(&o.hostile, "hostile", false, "measure instead the victim's publish and delivery p99 at -rate beside a hostile tenant of each attack class (test/hostile) against the same victim alone, each on a pipeline made for its turn")
	flag.StringVar(&o.attacks, "attacks", "", "with -hostile: the comma-separated attack classes to measure (default all: fan-out, many Subscriptions, slow sinks, failing sinks, refused publishes, large events, redirects, reply storm, all at once; the probes of where a cost lies only when named: one busy Subscription, idle Subscriptions, 100 types to one Subscription, bare: 20 on one subject in bursts, bare: 1 on one subject in bursts, bare: 100 consumers, bare: 100 on their stream, bare: 5 consumers, bare: 1 of 100 subjects)")
	flag.BoolVar(&o.apart, "apart", false, "with -hostile: each attacker on a pipeline of its own (a NATS process and an event bridge process), sharing nothing with the victim's but the machine: what the machine's cores cost the victim, which no share in kfn can take away (apart.go)")
	flag.BoolVar(&o.natsProcess, "nats-process", true, "with -hostile: run each turn's NATS server in a process of its own, as in a cluster (NATS a pod of its own, sharing the machine's cores); false: in the benchmark's process, beside the event bridge and the victim's load (the rows before 2026-11-28)")
	flag.BoolVar(&o.idle, "idle", false, "measure instead the CPU (over -duration) and memory of a dispatcher process serving -subscriptions idle Subscriptions")
	flag.DurationVar(&o.slice, "slice", time.Second, "the throughput of the pipelines is measured in turns of this length, -duration in all for each")
	flag.IntVar(&o.keys, "ordered", 0, "measure instead kfn delivering in order per partition key, with this many keys, against kfn delivering the same events unordered")
	flag.StringVar(&o.pipelines, "pipelines", "bare,bare-ce,kfn", "the pipelines to run, for profiling one alone (the ratios need bare, bare-ce and kfn); also bare-ce-http, bare-ce-noid and bare-ce-packed, which split what the CloudEvents form costs")
	var c childFlags
	flag.StringVar(&c.nats, "child-dispatcher", "", "internal: run as a dispatcher process of the benchmark, on this NATS server")
	flag.StringVar(&c.sink, "child-sink", "", "internal: the sink of a dispatcher process")
	flag.IntVar(&c.serve, "child-serve", 0, "internal: how many of the Subscriptions a dispatcher process serves")
	flag.StringVar(&c.bare, "child-bare", "", "internal: run as the process of a bare-consumers probe of -hostile (JSON), on the NATS server -child-sink")
	flag.BoolVar(&c.natsServer, "child-nats", false, "internal: run as the NATS process of -nats-process")
	flag.StringVar(&c.natsMember, "child-nats-member", "", "internal: run as a NATS process of a cluster of processes (<i>,<store dir>,<route port>...)")
	flag.StringVar(&c.apart, "child-apart", "", "internal: run as the attacker's event bridge process of -hostile -apart (JSON)")
	flag.StringVar(&c.attacker, "child-attacker", "", "internal: run as the attacker process of -hostile, of this attack class (its victim's sink is -child-sink)")
	flag.Parse()
	// Dispatcher and NATS processes write their profiles beside the
	// benchmark's, with the suffix ".dispatcher<pid>" or ".nats<pid>".
	profiles.cpu, profiles.mem, profiles.mutex = *cpuprofile, *memprofile, *mutexprofile
	if c.nats != "" || c.natsServer {
		suffix := ".dispatcher"
		if c.natsServer {
			suffix = ".nats"
		}
		for _, p := range []*string{cpuprofile, memprofile, mutexprofile} {
			if *p != "" {
				*p += fmt.Sprintf("%s%d", suffix, os.Getpid())
			}
		}
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "eventbridge-bench:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "eventbridge-bench:", err)
			os.Exit(1)
		}
	}
	if *mutexprofile != "" {
		runtime.SetMutexProfileFraction(1)
	}
	var err error
	switch {
	case c.attacker != "":
		err = childAttacker(c.attacker, c.sink)
	case c.apart != "":
		err = childApart(c.apart)
	case c.natsServer:
		err = childNATS()
	case c.natsMember != "":
		err = childNATSMember(c.natsMember)
	case c.bare != "":
		err = childBare(c.bare, c.sink)
	case c.nats != "":
		err = childDispatcher(c, o)
	default:
		cpu, _ := procstat.ReadCPUTimes()
		err = run(o)
		// On a virtual machine the host takes CPU time from it while its
		// other machines are busy: the figures of a run that lost much are
		// not a quiet machine's, whatever the load average said.
		fmt.Printf("\nCPU time taken by the host (steal) during the run: %s\n", procstat.Stolen(cpu))
	}
	pprof.StopCPUProfile()
	if err == nil && *memprofile != "" {
		err = writeProfile("allocs", *memprofile)
	}
	if err == nil && *mutexprofile != "" {
		err = writeProfile("mutex", *mutexprofile)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "eventbridge-bench:", err)
		os.Exit(1)
	}
}

// profiles are the -cpuprofile, -memprofile and -mutexprofile of the
// benchmark, passed on to its dispatcher processes.
var profiles struct{ cpu, mem, mutex string }

// pipeline is something to publish to whose deliveries reach the sink.
type pipeline struct {
	name   string
	url    string // where the load generator POSTs
	binary bool   // send CloudEvents headers
	types  int    // event types to spread the events over (>= 1)
	keys   int    // partition keys to give the events in turn (0: none)
	// token, when set, is the sender's: its requests carry it as a bearer
	// token.
	token   string
	cleanup func()
}

// eventType is the i-th event type of a pipeline with n types.
func eventType(i int64, n int) string {
	if n <= 1 {
		return "order.created.v1"
	}
	return fmt.Sprintf("order%d.created.v1", i%int64(n))
}

func run(o options) error {
	if o.slice <= 0 || o.duration <= 0 {
		return errors.New("-duration and -slice must be positive")
	}
	ns, stop, err := startNATS()
	if err != nil {
		return err
	}
	defer stop()
	natsMessages = func() int64 {
		v, err := ns.Varz(nil)
		if err != nil {
			return 0
		}
		return v.InMsgs + v.OutMsgs
	}
	sink := newSink()
	var sinkSrv *http.Server
	var sinkURL string
	as(partSink, func() { sinkSrv, sinkURL, err = serve(sink) })
	if err != nil {
		return err
	}
	defer sinkSrv.Close()

	fmt.Printf("event bridge benchmark: %d B events, file storage (default sync), %d publishing connections, %d in flight to the sink, load generator in-process, GOMAXPROCS=%d\n\n",
		o.size, o.connections, o.inflight, runtimeProcs())
	switch {
	case o.observe != "":
		return observability(ns.ClientURL(), sink, sinkURL, o)
	case o.replicas:
		return replicas(ns.ClientURL(), sink, sinkURL, o)
	case o.idle:
		return idle(ns.ClientURL(), sinkURL, o)
	case o.hostile:
		return hostileTenant(sink, sinkURL, o)
	case o.r3:
		return streamReplicas(ns.ClientURL(), sink, sinkURL, o)
	case o.keys > 0:
		return ordered(ns.ClientURL(), sink, sinkURL, o)
	}
	type result struct {
		throughput float64
		p50, p99   time.Duration
		lost       int
		cpu        float64 // µs per event at o.rate
	}
	var pipelines []*pipeline
	for _, b := range []struct {
		part  string
		build func(string, string, options) (*pipeline, error)
	}{{partBare, bare}, {partBareCE, bareCloudEvents}, {partKfn, plainKfn},
		{"bare-ce-http", ceForm("bare-ce-http")}, {"bare-ce-noid", ceForm("bare-ce-noid")}, {"bare-ce-packed", ceForm("bare-ce-packed")}} {
		if !slices.Contains(strings.Split(o.pipelines, ","), b.part) {
			continue
		}
		var p *pipeline
		as(b.part, func() { p, err = b.build(ns.ClientURL(), sinkURL, o) })
		if err != nil {
			return err
		}
		defer p.cleanup()
		// Warm up connections and the file store.
		if _, err := throughput(p, sink, o, time.Second); err != nil {
			return err
		}
		pipelines = append(pipelines, p)
	}
	// Every round's turns count: a pipeline's throughput is its events
	// over its time in all of them, its latencies are all of them. Its
	// pipelines having been measured in the same turns, a ratio compares
	// them under the same conditions (the best round of each, as this
	// benchmark used to take, compared each with its luckiest moment).
	loads, timings := map[string]load{}, map[string]timing{}
	var raw float64
	for round := 1; round <= o.rounds; round++ {
		if o.subs <= 1 {
			r, err := rawJetStream(ns.ClientURL(), o, o.duration)
			if err != nil {
				return err
			}
			fmt.Printf("round %d  raw     throughput %8.0f events/s   (JetStream publish -> pull -> ack, no HTTP)\n", round, r)
			raw += r / float64(o.rounds)
		}
		// The order rotates: whatever the machine does meanwhile falls on
		// each in turn.
		order := append(slices.Clone(pipelines[round%len(pipelines):]), pipelines[:round%len(pipelines)]...)
		roundLoads, roundTimings, err := measureInTurns(order, sink, o)
		if err != nil {
			return err
		}
		for _, p := range order {
			l, t := roundLoads[p.name], roundTimings[p.name]
			fmt.Printf("round %d  %-7s throughput %8.0f events/s (CPU %5.1f µs/event)   latency at %d/s: p50 %6.2f ms  p99 %6.2f ms  CPU %5.1f µs/event  (undelivered %d)\n",
				round, p.name, l.rate(), l.cpuPerEvent(), o.rate, ms(t.percentile(50)), ms(t.percentile(99)), t.cpuPerEvent(), t.lost)
			loads[p.name] = loads[p.name].add(l)
			timings[p.name] = timings[p.name].add(t)
		}
	}
	results := map[string]result{}
	fmt.Println()
	for _, p := range pipelines {
		l, t := loads[p.name], timings[p.name]
		r := result{throughput: l.rate(), p50: t.percentile(50), p99: t.percentile(99), lost: t.lost, cpu: t.cpuPerEvent()}
		results[p.name] = r
		fmt.Printf("all    %-7s throughput %8.0f events/s (CPU %5.1f µs/event, NATS %4.1f messages/event, %d events)   latency at %d/s: p50 %6.2f ms  p99 %6.2f ms  CPU %5.1f µs/event, NATS %4.1f messages/event  (%d events, undelivered %d)\n",
			p.name, r.throughput, l.cpuPerEvent(), l.natsPerEvent(), l.events, o.rate, ms(r.p50), ms(r.p99), r.cpu, t.natsPerEvent(), t.delivered, r.lost)
	}
	if _, ok := results["bare"]; ok {
		// What each part of the CloudEvents form costs, at full load.
		for _, name := range []string{"bare-ce-http", "bare-ce-noid", "bare-ce-packed", "bare-ce"} {
			if _, ok := results[name]; ok {
				fmt.Printf("%s/bare throughput ratio: %.3f, CPU per event at full load %.3f\n",
					name, results[name].throughput/results["bare"].throughput, loads[name].cpuPerEvent()/loads["bare"].cpuPerEvent())
			}
		}
	}
	b, ce, k := results["bare"], results["bare-ce"], results["kfn"]
	if b.throughput == 0 || ce.throughput == 0 || k.throughput == 0 {
		return nil // no ratio without all three
	}
	fmt.Printf("\nkfn/bare throughput ratio: %.2f (target >= 0.85), p99 ratio %.2f (target <= 1.5 at 1,000 Subscriptions), CPU per event ratio %.2f\n",
		k.throughput/b.throughput, ms(k.p99)/ms(b.p99), k.cpu/b.cpu)
	fmt.Printf("kfn/bare-ce throughput ratio: %.2f, p99 ratio %.2f, CPU per event ratio %.2f; bare-ce/bare throughput ratio %.2f (what the CloudEvents stored form costs JetStream and HTTP)\n",
		k.throughput/ce.throughput, ms(k.p99)/ms(ce.p99), k.cpu/ce.cpu, ce.throughput/b.throughput)
	fmt.Printf("kfn p99 at %d events/s: %.2f ms (target < 5 ms)\n", o.rate, ms(k.p99))
	const group = "event bridge"
	suffix := ""
	if o.subs > 1 {
		suffix = fmt.Sprintf(", %d Subscriptions", o.subs)
	}
	figs := []figures.Figure{
		{Group: group, Name: fmt.Sprintf("throughput, %d B events%s", o.size, suffix), Unit: "events/s", Value: k.throughput,
			Anchor: "bare pipeline", AnchorValue: b.throughput,
			Series: "event bridge throughput by Subscriptions", X: float64(max(o.subs, 1)), XLabel: "Subscriptions"},
		{Group: group, Name: fmt.Sprintf("p99 latency at %d events/s%s", o.rate, suffix), Unit: "ms", Value: ms(k.p99),
			Anchor: "bare pipeline", AnchorValue: ms(b.p99),
			Series: fmt.Sprintf("event bridge p99 latency at %d events/s by Subscriptions", o.rate), X: float64(max(o.subs, 1)), XLabel: "Subscriptions"},
		{Group: group, Name: fmt.Sprintf("CPU per event at %d events/s%s (NATS, pipeline, sink and load generator)", o.rate, suffix), Unit: "µs", Value: k.cpu,
			Anchor: "bare pipeline", AnchorValue: b.cpu},
		{Group: group, Name: fmt.Sprintf("throughput against the bare CloudEvents pipeline, %d B events%s", o.size, suffix), Unit: "events/s", Value: k.throughput,
			Anchor: "bare pipeline with CloudEvents headers and message ids", AnchorValue: ce.throughput},
	}
	// Issue 20: at 1 and 1,000 Subscriptions the throughput is at least
	// 0.85 of the bare pipeline's, and at 1,000 the p99 within 1.5 times.
	if o.subs >= 1000 {
		figs[0].Target = figures.Target{MinRatio: 0.85, Text: ">= 85% of bare"}
		figs[1].Target = figures.Target{MaxRatio: 1.5, Text: "<= 1.5x bare"}
	}
	if o.subs <= 1 {
		figs[0].Target = figures.Target{Min: 10000, MinRatio: 0.85, Text: ">= 10,000 events/s and >= 85% of bare"}
		figs[1].Target = figures.Target{Max: 5, Text: "< 5 ms"}
		figs = append(figs,
			figures.Figure{Group: group, Name: fmt.Sprintf("throughput against raw JetStream, %d B events", o.size), Unit: "events/s", Value: k.throughput,
				Anchor: "raw JetStream (publish, pull, ack; no HTTP)", AnchorValue: raw},
			figures.Figure{Group: group, Name: fmt.Sprintf("p50 latency at %d events/s", o.rate), Unit: "ms", Value: ms(k.p50),
				Anchor: "bare pipeline", AnchorValue: ms(b.p50)})
	}
	return figures.Append(o.figures, figs...)
}

// startNATS starts an embedded NATS server with JetStream on a store of
// its own; stop shuts it down and removes the store.
func startNATS() (ns *server.Server, stop func(), err error) {
	return startNATSAs(partNATS)
}

// startNATSAs is startNATS with the profile label part=part on the
// server's goroutines.
func startNATSAs(part string) (ns *server.Server, stop func(), err error) {
	dir, err := os.MkdirTemp("", "kfn-bench-")
	if err != nil {
		return nil, nil, err
	}
	as(part, func() {
		ns, err = server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true, MaxPayload: 8 << 20})
		if err == nil {
			ns.Start()
		}
	})
	if err == nil && !ns.ReadyForConnections(10*time.Second) {
		ns.Shutdown()
		err = errors.New("nats not ready")
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return ns, func() { ns.Shutdown(); os.RemoveAll(dir) }, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func runtimeProcs() int { return runtimeGOMAXPROCS() }

// sink counts deliveries and records publish-to-delivery latency, read from
// the first 19 bytes of the data (the send time in Unix nanoseconds).
type sink struct {
	delivered atomic.Int64
	mu        sync.Mutex
	record    bool
	latencies []time.Duration
}

func newSink() *sink { return &sink{} }

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var buf [19]byte
	n, _ := io.ReadFull(r.Body, buf[:])
	_, _ = io.Copy(io.Discard, r.Body)
	s.delivered.Add(1)
	s.mu.Lock()
	if s.record {
		if sent, err := strconv.ParseInt(string(buf[:n]), 10, 64); err == nil {
			s.latencies = append(s.latencies, time.Since(time.Unix(0, sent)))
		}
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func serve(h http.Handler) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	// As kfn's own servers bound headers (the publisher's 64 KiB).
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, MaxHeaderBytes: publisher.MaxHeaderBytes}
	go func() { _ = srv.Serve(ln) }()
	return srv, "http://" + ln.Addr().String(), nil
}

func payload(size int) []byte {
	b := bytes.Repeat([]byte("x"), size)
	stamp(b)
	return b
}

func stamp(b []byte) {
	copy(b, strconv.AppendInt(make([]byte, 0, 19), time.Now().UnixNano(), 10))
}

var ids atomic.Int64

func newRequest(p *pipeline, body []byte) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, p.url, bytes.NewReader(body))
	if p.binary {
		req.Header.Set("Ce-Specversion", "1.0")
		id := ids.Add(1)
		req.Header.Set("Ce-Id", strconv.FormatInt(id, 10))
		req.Header.Set("Ce-Source", "bench")
		req.Header.Set("Ce-Type", eventType(id, p.types))
		if p.keys > 0 {
			req.Header.Set("Ce-Partitionkey", "key-"+strconv.FormatInt(id%int64(p.keys), 10))
		}
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	return req
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxIdleConns: 1024, DisableCompression: true}}

func post(p *pipeline, size int) error {
	resp, err := client.Do(newRequest(p, payload(size)))
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: publish answered %d", p.name, resp.StatusCode)
	}
	return nil
}

// throughput publishes as fast as the connections allow for d and returns
// the delivered events per second, counting until every published event
// reached the sink.
func throughput(p *pipeline, s *sink, o options, d time.Duration) (tp float64, err error) {
	var l load
	as(partLoad, func() { l, err = loadThroughput(p, s, o, d) })
	return l.rate(), err
}

// load is what a pipeline carried at full load: events published (and
// delivered), in how long (elapsed until the last was delivered,
// publishing until the last was acknowledged), for how much CPU of the
// process and how many bytes it allocated.
type load struct {
	events     int64
	elapsed    time.Duration
	publishing time.Duration
	cpu        time.Duration
	alloc      uint64
	// natsMsgs are the messages the pipelines' NATS server took in and
	// sent out meanwhile (natsMessages): publishes, pull requests and
	// their answers, acknowledgements.
	natsMsgs int64
}

// natsMessages counts the messages the benchmark's NATS server took in
// and sent out so far (its varz); 0 when not set (the benchmarks with a
// NATS of their own).
var natsMessages = func() int64 { return 0 }

// natsPerEvent is the NATS messages per event.
func (l load) natsPerEvent() float64 { return float64(l.natsMsgs) / float64(max(l.events, 1)) }

// rate is the events delivered per second.
func (l load) rate() float64 { return float64(l.events) / max(l.elapsed.Seconds(), 1e-9) }

// publishRate is the events acknowledged by the publisher per second.
func (l load) publishRate() float64 { return float64(l.events) / max(l.publishing.Seconds(), 1e-9) }

// cpuPerEvent is the CPU of the whole process (NATS, pipeline, sink and
// load generator) per event, in µs.
func (l load) cpuPerEvent() float64 {
	return float64(l.cpu) / float64(time.Microsecond) / float64(max(l.events, 1))
}

// allocPerEvent is the bytes the process allocated per event.
func (l load) allocPerEvent() float64 { return float64(l.alloc) / float64(max(l.events, 1)) }

func (l load) add(m load) load {
	return load{events: l.events + m.events, elapsed: l.elapsed + m.elapsed, publishing: l.publishing + m.publishing, cpu: l.cpu + m.cpu, alloc: l.alloc + m.alloc,
		natsMsgs: l.natsMsgs + m.natsMsgs}
}

// measureInTurns measures the throughput of each pipeline, then its
// latency, each over o.duration in slices of o.slice taken in turn (the
// order rotating from slice to slice): a change of the machine's other
// load, which on a shared machine lasts seconds, falls on all of them
// alike, where one measurement per pipeline after the other would give it
// to one alone. A pipeline's throughput is its events over its time in
// all its slices; its latencies are those of all its slices.
func measureInTurns(pipelines []*pipeline, s *sink, o options) (map[string]load, map[string]timing, error) {
	loads, timings := map[string]load{}, map[string]timing{}
	err := inTurns(pipelines, o, func(p *pipeline) error {
		var l load
		var err error
		as(partLoad, func() { l, err = loadThroughput(p, s, o, o.slice) })
		loads[p.name] = loads[p.name].add(l)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	err = inTurns(pipelines, o, func(p *pipeline) error {
		var t timing
		var err error
		as(partLoad, func() { t, err = recordLatencies(p, s, o, o.slice) })
		timings[p.name] = timings[p.name].add(t)
		return err
	})
	return loads, timings, err
}

// inTurns calls measure for each pipeline in turn, o.duration/o.slice
// times each, the order rotating by one every turn.
func inTurns(pipelines []*pipeline, o options, measure func(*pipeline) error) error {
	for i := range max(int(o.duration/o.slice), 1) {
		for _, p := range append(slices.Clone(pipelines[i%len(pipelines):]), pipelines[:i%len(pipelines)]...) {
			if err := measure(p); err != nil {
				return err
			}
		}
	}
	return nil
}

func loadThroughput(p *pipeline, s *sink, o options, d time.Duration) (load, error) {
	cpu0, alloc0, msgs0 := cpuTime(), allocated(), natsMessages()
	start := s.delivered.Load()
	var published atomic.Int64
	var firstErr error
	var once sync.Once
	t0 := time.Now()
	deadline := t0.Add(d)
	var wg sync.WaitGroup
	for range o.connections {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if err := post(p, o.size); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				published.Add(1)
			}
		}()
	}
	wg.Wait()
	publishing := time.Since(t0)
	if firstErr != nil {
		return load{}, firstErr
	}
	want := start + published.Load()
	for limit := time.Now().Add(30 * time.Second); s.delivered.Load() < want; time.Sleep(time.Millisecond) {
		if time.Now().After(limit) {
			return load{}, fmt.Errorf("%s: %d of %d events delivered after 30s", p.name, s.delivered.Load()-start, published.Load())
		}
	}
	return load{events: published.Load(), elapsed: time.Since(t0), publishing: publishing, cpu: cpuTime() - cpu0, alloc: allocated() - alloc0,
		natsMsgs: natsMessages() - msgs0}, nil
}

// latency publishes at o.rate for o.duration and returns p50 and p99 of
// publish-to-delivery time, and how many events were not delivered.
func latency(p *pipeline, s *sink, o options) (p50, p99 time.Duration, lost int, err error) {
	var t timing
	as(partLoad, func() { t, err = recordLatencies(p, s, o, o.duration) })
	return t.percentile(50), t.percentile(99), t.lost, err
}

// timing is what publishing at a steady rate measured: the latency of
// every delivered event (publish to delivery), the time of every
// acknowledged publish request, the events not delivered, and the CPU of
// the whole process per delivered event.
type timing struct {
	latencies []time.Duration
	publishes []time.Duration
	lost      int
	delivered int64
	cpu       time.Duration
	natsMsgs  int64 // as load's
}

func (t timing) add(u timing) timing {
	return timing{latencies: append(t.latencies, u.latencies...), publishes: append(t.publishes, u.publishes...),
		lost: t.lost + u.lost, delivered: t.delivered + u.delivered, cpu: t.cpu + u.cpu, natsMsgs: t.natsMsgs + u.natsMsgs}
}

// natsPerEvent is the NATS messages per delivered event.
func (t timing) natsPerEvent() float64 { return float64(t.natsMsgs) / float64(max(t.delivered, 1)) }

// percentile returns the q-th percentile of the delivery latencies, 0 if
// none.
func (t timing) percentile(q int) time.Duration { return percentile(t.latencies, q) }

// publishPercentile returns the q-th percentile of the acknowledged
// publish requests' times, 0 if none.
func (t timing) publishPercentile(q int) time.Duration { return percentile(t.publishes, q) }

func percentile(ds []time.Duration, q int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	lat := slices.Clone(ds)
	slices.Sort(lat)
	return lat[len(lat)*q/100]
}

// cpuPerEvent is the CPU of the whole process per delivered event, in µs.
func (t timing) cpuPerEvent() float64 {
	return float64(t.cpu) / float64(time.Microsecond) / float64(max(t.delivered, 1))
}

// recordLatencies publishes at o.rate for d and records the
// publish-to-delivery time of each event.
func recordLatencies(p *pipeline, s *sink, o options, d time.Duration) (timing, error) {
	s.mu.Lock()
	s.record, s.latencies = true, nil
	s.mu.Unlock()
	cpu0, start, msgs0 := cpuTime(), s.delivered.Load(), natsMessages()
	n := int(d.Seconds() * float64(o.rate))
	interval := time.Second / time.Duration(o.rate)
	var wg sync.WaitGroup
	var failed atomic.Int64
	var pubMu sync.Mutex
	publishes := make([]time.Duration, 0, n)
	t0 := time.Now()
	for i := range n {
		time.Sleep(time.Until(t0.Add(time.Duration(i) * interval)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			began := time.Now()
			if err := post(p, o.size); err != nil {
				failed.Add(1)
				return
			}
			took := time.Since(began)
			pubMu.Lock()
			publishes = append(publishes, took)
			pubMu.Unlock()
		}()
	}
	wg.Wait()
	for limit := time.Now().Add(10 * time.Second); s.delivered.Load()-start < int64(n)-failed.Load() && time.Now().Before(limit); time.Sleep(time.Millisecond) {
	}
	s.mu.Lock()
	t := timing{latencies: slices.Clone(s.latencies), publishes: publishes, delivered: s.delivered.Load() - start, cpu: cpuTime() - cpu0,
		natsMsgs: natsMessages() - msgs0}
	s.record = false
	s.mu.Unlock()
	t.lost = n - len(t.latencies)
	if len(t.latencies) == 0 {
		return t, fmt.Errorf("%s: nothing delivered", p.name)
	}
	return t, nil
}

// bare is the bare pipeline of plain events.
func bare(natsURL, sinkURL string, o options) (*pipeline, error) {
	return barePipeline(natsURL, sinkURL, o, "bare", bareForm{})
}

// bareCloudEvents is the bare pipeline of binary-mode CloudEvents.
func bareCloudEvents(natsURL, sinkURL string, o options) (*pipeline, error) {
	return barePipeline(natsURL, sinkURL, o, "bare-ce", bareForm{http: true, stored: true, msgID: true})
}

// ceForm builds the bare pipeline of ceForms[name].
func ceForm(name string) func(string, string, options) (*pipeline, error) {
	return func(natsURL, sinkURL string, o options) (*pipeline, error) {
		return barePipeline(natsURL, sinkURL, o, name, ceForms[name])
	}
}

// bareForm is what a bare pipeline carries of the CloudEvents it is sent.
type bareForm struct {
	// http: the load generator sends binary-mode CloudEvents (four ce-*
	// headers) and the sink gets ce-* headers with each event.
	http bool
	// stored: the ce-* headers and Content-Type are stored with the
	// event and delivered from there; without it the event's data alone
	// is stored and the sink gets the same four ce-* headers, fixed.
	stored bool
	// msgID: stored with the CloudEvent's source and id as JetStream
	// message id, de-duplicated within the stream's window.
	msgID bool
	// packed: the stored attributes are one header, "name=value;..."
	// (the load generator's values have no ';' or '=').
	packed bool
}

// ceForms are the bare pipelines between bare and bare-ce that split
// what the CloudEvents form costs (-pipelines names them): its HTTP
// headers alone, its stored headers without a message id, and its
// stored attributes packed into one header.
var ceForms = map[string]bareForm{
	"bare-ce-http":   {http: true},
	"bare-ce-noid":   {http: true, stored: true},
	"bare-ce-packed": {http: true, stored: true, msgID: true, packed: true},
}

// barePipeline is HTTP -> js.Publish -> pull consumer -> HTTP POST, nothing else.
// With several Subscriptions it has one consumer per Subscription, each
// filtered to its own subject, as kfn has, and publishes round robin over
// the subjects: the cost that JetStream itself adds per consumer is then in
// the anchor too.
//
// Its form says what it carries of binary-mode CloudEvents: bare-ce's
// load generator sends them, their ce-* headers and Content-Type are
// stored with the event, with the CloudEvent's source and id as message
// id, and delivered with it.
func barePipeline(natsURL, sinkURL string, o options, name string, form bareForm) (*pipeline, error) {
	ctx := context.Background()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Storage: jetstream.FileStorage, Retention: jetstream.InterestPolicy,
		// As kfn's event stream: NATS gives a stream without a limit 1,000 consumers.
		MaxConsumers: stream.DefaultMaxConsumers}); err != nil {
		return nil, err
	}
	subs := max(o.subs, 1)
	var next atomic.Int64
	srv, url, err := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		subject := name + "." + strconv.FormatInt(next.Add(1)%int64(subs), 10)
		switch {
		case err != nil:
		case form.stored:
			m := &nats.Msg{Subject: subject, Data: body, Header: nats.Header{}}
			for k, v := range r.Header {
				if strings.HasPrefix(k, "Ce-") || k == "Content-Type" {
					m.Header[strings.ToLower(k)] = v
				}
			}
			if form.packed {
				m.Header = packHeaders(m.Header)
			}
			var opts []jetstream.PublishOpt
			if form.msgID {
				opts = append(opts, jetstream.WithMsgID(r.Header.Get("Ce-Source")+r.Header.Get("Ce-Id")))
			}
			_, err = js.PublishMsg(r.Context(), m, opts...)
		default:
			_, err = js.Publish(r.Context(), subject, body)
		}
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	if err != nil {
		return nil, err
	}
	msgs := make(chan jetstream.Msg, o.inflight)
	var pulls sync.WaitGroup
	var its []jetstream.MessagesContext
	for i := range subs {
		cons, err := js.CreateOrUpdateConsumer(ctx, name, jetstream.ConsumerConfig{Durable: fmt.Sprintf("%s-%d", name, i),
			FilterSubject: name + "." + strconv.Itoa(i), AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: o.inflight})
		if err != nil {
			return nil, err
		}
		it, err := cons.Messages(jetstream.PullMaxMessages(o.inflight))
		if err != nil {
			return nil, err
		}
		its = append(its, it)
		pulls.Add(1)
		go func() {
			defer pulls.Done()
			for {
				m, err := it.Next()
				if err != nil {
					return
				}
				msgs <- m
			}
		}()
	}
	go func() { pulls.Wait(); close(msgs) }()
	out := &http.Client{Transport: dispatcher.NewTransport(egress.Policy{AllowLoopback: true})}
	var wg sync.WaitGroup
	for range o.inflight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range msgs {
				req, _ := http.NewRequest(http.MethodPost, sinkURL, bytes.NewReader(m.Data()))
				req.Header["Content-Type"] = []string{"application/octet-stream"}
				switch {
				case form.packed:
					unpackHeaders(m.Headers().Get(packedHeader), req.Header)
				case form.stored:
					for k, v := range m.Headers() {
						if strings.HasPrefix(k, "ce-") {
							req.Header[k] = v
						}
					}
				case form.http:
					for k, v := range fixedCEHeaders {
						req.Header[k] = v
					}
				}
				resp, err := out.Do(req)
				if err != nil {
					_ = m.Nak()
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				_ = m.Ack()
			}
		}()
	}
	return &pipeline{name: name, url: url + "/", binary: form.http, types: subs, cleanup: func() {
		for _, it := range its {
			it.Stop()
		}
		wg.Wait()
		srv.Close()
		nc.Close()
	}}, nil
}

// packedHeader is the one header of bare-ce-packed's stored attributes.
const packedHeader = "ce"

// fixedCEHeaders are what bare-ce-http's sink gets: as many ce-* headers
// as bare-ce's, of the same lengths, not read from the stored event.
var fixedCEHeaders = map[string][]string{
	"ce-specversion": {"1.0"}, "ce-id": {"100000"}, "ce-source": {"bench"}, "ce-type": {"order.created.v1"},
}

// packHeaders returns h's first values as one header, "name=value;...".
func packHeaders(h nats.Header) nats.Header {
	var b strings.Builder
	for k, v := range h {
		if len(v) > 0 {
			b.WriteString(k)
			b.WriteByte('=')
			b.WriteString(v[0])
			b.WriteByte(';')
		}
	}
	return nats.Header{packedHeader: {b.String()}}
}

// unpackHeaders sets in out the ce-* headers packHeaders packed.
func unpackHeaders(packed string, out http.Header) {
	for kv := range strings.SplitSeq(packed, ";") {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "ce-") {
			out[k] = []string{v}
		}
	}
}

// writeProfile writes the runtime's profile name to path: "allocs"
// (alloc_space shows what the run allocated) or "mutex" (the delays of
// goroutines waiting for locks, at the stacks that released them).
func writeProfile(name, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("write %s profile: %w", name, err)
	}
	return f.Close()
}
