package natstest

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Cluster is n embedded NATS servers routed to each other, with JetStream:
// a JetStream cluster such as the chart's 3-server NATS, in one process.
type Cluster struct {
	// Servers are its servers, each with a store of its own.
	Servers []*Server
}

// StartCluster starts n servers on loopback ports, routed to each other as
// cluster "kfn", and waits until JetStream can place a stream on any of
// them (a meta leader was elected and sees every server online). The
// servers are shut down when the test ends.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return startCluster(t, n)
}

func startCluster(t harness, n int) *Cluster {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		ports[i] = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	c := &Cluster{}
	for i := range n {
		s := &Server{t: t, opts: MemberOptions(i, ports, t.TempDir())}
		s.start()
		s.opts.Port = s.srv.Addr().(*net.TCPAddr).Port
		t.Cleanup(s.Shutdown)
		c.Servers = append(c.Servers, s)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !c.formed() {
		if time.Now().After(deadline) {
			t.Fatalf("no JetStream meta leader seeing all %d servers online within 30s", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return c
}

// MemberOptions are the options of server i of a cluster on loopback
// whose servers' route ports are routePorts, its store in storeDir: named
// n<i>, on a random client port. A program that runs each server in a
// process of its own starts them with these.
func MemberOptions(i int, routePorts []int, storeDir string) server.Options {
	var routes []*url.URL
	for _, p := range routePorts {
		routes = append(routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", p)})
	}
	return server.Options{
		ServerName: fmt.Sprintf("n%d", i),
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		JetStream:  true,
		StoreDir:   storeDir,
		NoLog:      true,
		NoSigs:     true,
		Cluster:    server.ClusterOpts{Name: "kfn", Host: "127.0.0.1", Port: routePorts[i]},
		Routes:     routes,
	}
}

// formed says whether one of the servers leads JetStream's meta group and
// sees every server of the cluster online with its JetStream stats. A
// leader alone is not enough: until a peer's stats reach it, the leader
// counts the peer offline and refuses to place a stream on it ("no
// suitable peers for placement, peer offline"), even a stream of one
// replica when no peer's stats have arrived yet.
func (c *Cluster) formed() bool {
	for _, s := range c.Servers {
		if s.srv.JetStreamIsLeader() {
			return len(s.srv.JetStreamClusterPeers()) == len(c.Servers)
		}
	}
	return false
}

// URL is the client URL of every server, comma-separated.
func (c *Cluster) URL() string {
	var urls []string
	for _, s := range c.Servers {
		urls = append(urls, s.URL())
	}
	return strings.Join(urls, ",")
}

// JetStream returns a JetStream context on a new connection to any of the
// servers, closed when the test ends.
func (c *Cluster) JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(c.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatalf("connect to nats: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return js
}
