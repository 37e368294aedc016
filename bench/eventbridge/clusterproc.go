package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/test/natstest"
)

// childNATSMember is a NATS process of a cluster of processes
// (launchClusterProcesses): spec is "<i>,<store dir>,<route port>...", it
// starts server i of natstest.MemberOptions, says "url <client URL>" on
// stdout, and shuts it down when its stdin closes.
func childNATSMember(spec string) error {
	fields := strings.Split(spec, ",")
	if len(fields) < 3 {
		return fmt.Errorf("-child-nats-member %q: want <i>,<store dir>,<route port>...", spec)
	}
	i, err := strconv.Atoi(fields[0])
	if err != nil {
		return fmt.Errorf("-child-nats-member %q: %w", spec, err)
	}
	var ports []int
	for _, f := range fields[2:] {
		p, err := strconv.Atoi(f)
		if err != nil {
			return fmt.Errorf("-child-nats-member %q: %w", spec, err)
		}
		ports = append(ports, p)
	}
	opts := natstest.MemberOptions(i, ports, fields[1])
	srv, err := server.NewServer(&opts)
	if err != nil {
		return err
	}
	srv.Start()
	defer srv.Shutdown()
	if !srv.ReadyForConnections(time.Minute) {
		return errors.New("nats server not ready within a minute")
	}
	serveUntilStdinCloses(srv.ClientURL())
	return nil
}

// clusterProcesses is a NATS cluster of n processes (childNATSMember).
type clusterProcesses struct {
	urls []string
	pids []int
	stop func()
}

// url is the client URL of every server, for a client to connect to one.
func (c *clusterProcesses) url() string { return strings.Join(c.urls, ",") }

// launchClusterProcesses starts a cluster of n NATS processes with their
// stores under dir and waits until it places an R3 stream.
func launchClusterProcesses(n int, dir string) (*clusterProcesses, error) {
	ports := make([]string, n)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		ports[i] = strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
	}
	c := &clusterProcesses{}
	var stops []func()
	c.stop = func() {
		for _, s := range stops {
			s()
		}
	}
	for i := range n {
		store := filepath.Join(dir, fmt.Sprintf("n%d", i))
		if err := os.MkdirAll(store, 0o700); err != nil {
			c.stop()
			return nil, err
		}
		url, pid, stop, err := startServerProcess("-child-nats-member", strings.Join(append([]string{strconv.Itoa(i), store}, ports...), ","))
		if err != nil {
			c.stop()
			return nil, fmt.Errorf("NATS process %d: %w", i, err)
		}
		stops = append(stops, stop)
		c.urls, c.pids = append(c.urls, url), append(c.pids, pid)
	}
	if err := waitPlacesR3(c.url()); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// waitPlacesR3 waits, at most a minute, until the cluster at url makes
// an R3 stream (its meta leader sees every server), and deletes it.
func waitPlacesR3(url string) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "kfn-bench-probe", Subjects: []string{"kfn.bench.probe"}, Replicas: 3, Storage: jetstream.MemoryStorage})
		if err == nil {
			err = js.DeleteStream(ctx, "kfn-bench-probe")
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the NATS cluster places no R3 stream within a minute: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cpu is the CPU time (user and system) each process used so far, read
// from /proc/<pid>/stat.
func (c *clusterProcesses) cpu() ([]time.Duration, error) {
	out := make([]time.Duration, len(c.pids))
	for i, pid := range c.pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return nil, err
		}
		// The fields after the command's closing parenthesis: state is
		// the first, utime the 12th, stime the 13th, in clock ticks (100
		// a second on Linux).
		s := string(data)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 13 {
			return nil, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
		}
		utime, err1 := strconv.ParseInt(fields[11], 10, 64)
		stime, err2 := strconv.ParseInt(fields[12], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		out[i] = time.Duration(utime+stime) * 10 * time.Millisecond
	}
	return out, nil
}

// serverCPU is what each NATS server of a cluster of 3 processes spent
// per event while one pipeline of R3 streams ran a full load.
type serverCPU struct {
	partitions int
	rate       float64   // events/s delivered
	perEvent   []float64 // µs of CPU per event, by server
}

// busiest is the largest of perEvent.
func (c serverCPU) busiest() float64 { return slices.Max(c.perEvent) }

// measureServerCPU runs kfn with R3 streams of each count of partitions
// on a NATS cluster of 3 processes of its own (the servers' CPU told
// apart, as on nodes of their own), a full load of o.duration after a
// warm-up, and returns each server's CPU per event.
func measureServerCPU(s *sink, sinkURL string, o options, counts []int) ([]serverCPU, error) {
	var out []serverCPU
	for _, n := range counts {
		dir, err := os.MkdirTemp("", "kfn-bench-procs-")
		if err != nil {
			return nil, err
		}
		m, err := func() (serverCPU, error) {
			defer os.RemoveAll(dir)
			cluster, err := launchClusterProcesses(3, dir)
			if err != nil {
				return serverCPU{}, err
			}
			defer cluster.stop()
			var p *pipeline
			as(partKfn, func() { p, err = kfnShaped(cluster.url(), sinkURL, o, nil, streamShape{replicas: 3, partitions: n}) })
			if err != nil {
				return serverCPU{}, err
			}
			defer p.cleanup()
			p.keys = partitionKeys
			if _, err := throughput(p, s, o, o.slice); err != nil { // warm up, leaders spread
				return serverCPU{}, err
			}
			before, err := cluster.cpu()
			if err != nil {
				return serverCPU{}, err
			}
			var l load
			as(partLoad, func() { l, err = loadThroughput(p, s, o, o.duration) })
			if err != nil {
				return serverCPU{}, err
			}
			after, err := cluster.cpu()
			if err != nil {
				return serverCPU{}, err
			}
			m := serverCPU{partitions: n, rate: l.rate()}
			for i := range after {
				m.perEvent = append(m.perEvent, float64(after[i]-before[i])/float64(time.Microsecond)/float64(max(l.events, 1)))
			}
			return m, nil
		}()
		if err != nil {
			return nil, fmt.Errorf("%d partitions on 3 NATS processes: %w", n, err)
		}
		fmt.Printf("%d partition(s), R3 on 3 NATS processes: %.0f events/s; each server's CPU per event: %s µs\n", n, m.rate, each(m.perEvent, "%.1f"))
		out = append(out, m)
	}
	return out, nil
}

// each formats every value of v with format, separated by spaces.
func each(v []float64, format string) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf(format, x)
	}
	return strings.Join(parts, " ")
}
