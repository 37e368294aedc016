package chart_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/contract/inflight"
	"github.com/kfn-dev/kfn/eventbridge"
	"github.com/kfn-dev/kfn/eventbridge/depcache"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/internal/natsconn"
	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/scaler/activity"
	"github.com/kfn-dev/kfn/test/testport"
)

// chartNATS is what the chart renders for its NATS: the server's
// configuration, the environment each server starts with (passwords,
// route URLs), and the files of its Secrets.
type chartNATS struct {
	conf string
	// env is the server container's environment, $(VAR) references
	// expanded, without POD_NAME.
	env map[string]string
	// passwords are the Secret's passwords by key (eventbridge, scaler,
	// routes).
	passwords map[string]string
	// tlsFiles are the certificate Secret's files (ca.crt, tls.crt,
	// tls.key), if any.
	tlsFiles map[string][]byte
}

func renderedNATS(t *testing.T, vals map[string]any) (chartNATS, rendered) {
	t.Helper()
	r := typed(t, render(t, vals))
	return natsOf(t, r), r
}

// natsOf returns the NATS of a rendering that has one.
func natsOf(t *testing.T, r rendered) chartNATS {
	t.Helper()
	cm := r.configMaps["kfn-nats"]
	require.NotNil(t, cm)
	n := chartNATS{conf: cm.Data["nats.conf"], env: map[string]string{}, passwords: secretData(t, r.objs, "kfn-nats-auth")}
	if tlsData := secretData(t, r.objs, "kfn-nats-tls"); tlsData != nil {
		n.tlsFiles = map[string][]byte{}
		for k, v := range tlsData {
			n.tlsFiles[k] = []byte(v)
		}
	}
	for _, e := range r.statefulSets["kfn-nats"].Spec.Template.Spec.Containers[0].Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			require.Equal(t, "kfn-nats-auth", e.ValueFrom.SecretKeyRef.Name)
			n.env[e.Name] = n.passwords[e.ValueFrom.SecretKeyRef.Key]
		case e.ValueFrom == nil:
			n.env[e.Name] = regexp.MustCompile(`\$\(([A-Z0-9_]+)\)`).ReplaceAllStringFunc(e.Value, func(ref string) string {
				return n.env[ref[2:len(ref)-1]]
			})
		}
	}
	return n
}

// secretData returns the decoded data of the rendered Secret name, or nil.
func secretData(t *testing.T, objs []*unstructured.Unstructured, name string) map[string]string {
	t.Helper()
	o := find(objs, "Secret", name)
	if o == nil {
		return nil
	}
	data, _, err := unstructured.NestedStringMap(o.Object, "data")
	require.NoError(t, err)
	out := map[string]string{}
	for k, v := range data {
		b, err := base64.StdEncoding.DecodeString(v)
		require.NoError(t, err, "%s/%s", name, k)
		out[k] = string(b)
	}
	return out
}

// options parses the rendered configuration as server i (POD_NAME
// kfn-nats-i) does, its files in dir: what the server runs with, before
// the test moves its listeners to loopback ports.
func (n chartNATS) options(t *testing.T, i int, dir string) *server.Options {
	t.Helper()
	conf := strings.ReplaceAll(n.conf, "/etc/nats/tls/", dir+"/")
	for name, b := range n.tlsFiles {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o600))
	}
	file := filepath.Join(dir, "nats.conf")
	require.NoError(t, os.WriteFile(file, []byte(conf), 0o600))
	for k, v := range n.env {
		t.Setenv(k, v)
	}
	t.Setenv("POD_NAME", fmt.Sprintf("kfn-nats-%d", i))
	opts, err := server.ProcessConfigFile(file)
	require.NoError(t, err, "the rendered nats.conf:\n%s", conf)
	opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", -1, 0
	opts.StoreDir = filepath.Join(dir, "data")
	opts.NoSigs, opts.NoLog = true, os.Getenv("KFN_NATS_LOG") == ""
	opts.Debug = !opts.NoLog
	return opts
}

// startServer starts one server with opts and stops it when the test ends.
func startServer(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	srv, err := server.NewServer(opts)
	require.NoError(t, err)
	srv.Start()
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	require.True(t, srv.ReadyForConnections(10*time.Second), "the server is ready")
	return srv
}

// startSingle runs the rendered configuration as one server, without the
// routes of a cluster: the client side of the configuration.
func (n chartNATS) startSingle(t *testing.T) *server.Server {
	t.Helper()
	opts := n.options(t, 0, t.TempDir())
	opts.Cluster, opts.Routes = server.ClusterOpts{}, nil
	return startServer(t, opts)
}

// passwordFile writes the password of a component to a file, as the
// chart's projected volume mounts it.
func (n chartNATS) passwordFile(t *testing.T, component string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "password")
	require.NoError(t, os.WriteFile(f, []byte(n.passwords[component]), 0o600))
	return f
}

// connectAs connects as the chart's user of component, with nats.go's
// asynchronous errors (permission violations) sent to errs.
func (n chartNATS) connectAs(t *testing.T, srv *server.Server, component string, errs chan<- error) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("kfn-"+component, n.passwords[component]),
		nats.CustomInboxPrefix(natsconn.InboxPrefix("kfn-"+component)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case errs <- err:
			default:
			}
		}))
	require.NoError(t, err, "%s connects with its password", component)
	t.Cleanup(nc.Close)
	return nc
}

// TestNATSFileStoreIsTheVolume: JetStream's file store limit is 80% of
// the volume's size, so that the streams' and the dependency bucket's
// reservations (1 GiB + 256 MiB + 2 GiB by default) are checked against
// what the volume holds. Without it NATS takes 75% of the free disk at its
// start, which on a CI machine was 2.95 GB, less than those reservations.
// Fails when max_file_store is not rendered from
// nats.jetstream.fileStorage.size.
func TestNATSFileStoreIsTheVolume(t *testing.T) {
	for size, volume := range map[string]int64{"": 10 << 30, "20Gi": 20 << 30} {
		vals := map[string]any{}
		if size != "" {
			vals["nats"] = map[string]any{"jetstream": map[string]any{"fileStorage": map[string]any{"size": size}}}
		}
		n, r := renderedNATS(t, vals)
		assert.Equal(t, volume*8/10, n.options(t, 0, t.TempDir()).JetStreamMaxStore, "size %q", size)
		claims := r.statefulSets["kfn-nats"].Spec.VolumeClaimTemplates
		require.Len(t, claims, 1)
		assert.Equal(t, volume, claims[0].Spec.Resources.Requests.Storage().Value(), "the volume asked for")
	}
}

// TestNATSRefusesAnonymousClients serves the chart's default NATS
// configuration: a client without a user, with a wrong password or as a
// user of a component with another's password is refused with NATS's
// Authorization Violation; each component's own user and password are
// taken. Fails when the configuration has no authorization block.
func TestNATSRefusesAnonymousClients(t *testing.T) {
	n, r := renderedNATS(t, nil)
	require.Len(t, n.passwords, 3, "the chart makes the passwords")
	for k, p := range n.passwords {
		assert.Len(t, p, 32, k)
	}
	srv := n.startSingle(t)

	for name, opts := range map[string][]nats.Option{
		"anonymous":           nil,
		"a wrong password":    {nats.UserInfo("kfn-eventbridge", "not-the-password")},
		"another's password":  {nats.UserInfo("kfn-scaler", n.passwords["eventbridge"])},
		"an unknown user":     {nats.UserInfo("admin", n.passwords["eventbridge"])},
		"the routes' account": {nats.UserInfo("kfn-route", n.passwords["routes"])},
	} {
		_, err := nats.Connect(srv.ClientURL(), opts...)
		require.Error(t, err, name)
		assert.ErrorIs(t, err, nats.ErrAuthorization, name)
	}
	// The chart's own flags and files, through the components' connection.
	for _, component := range []string{"eventbridge", "scaler"} {
		args := container(t, r.deployments["kfn-"+component]).Args
		assert.Contains(t, args, "-nats-user=kfn-"+component)
		assert.Contains(t, args, "-nats-password-file=/etc/kfn/nats/password")
		nc, err := natsconn.Connect(srv.ClientURL(), natsconn.Options{Name: "kfn-" + component, Credentials: natsconn.Credentials{
			User: "kfn-" + component, PasswordFile: n.passwordFile(t, component),
		}})
		require.NoError(t, err)
		require.Eventually(t, nc.IsConnected, 10*time.Second, 10*time.Millisecond, "%s connects with its own password", component)
		nc.Close()
	}
}

// TestNATSInboxesAreEachComponentsOwn: the event bridge's and the
// scaler's connections (natsconn, named as their binaries name them) take
// their replies on inboxes of their own, and the chart's NATS lets each
// user subscribe to its own inboxes only: the scaler's user cannot read
// what the bridge is sent on its inboxes (pulled events, dead letters,
// dependency objects, JetStream's answers), nor the bridge's user the
// scaler's; each still gets the answers to its own requests.
// Fails when a user may subscribe to every inbox (_INBOX.>).
func TestNATSInboxesAreEachComponentsOwn(t *testing.T) {
	n, _ := renderedNATS(t, nil)
	srv := n.startSingle(t)
	for component, other := range map[string]string{"eventbridge": "scaler", "scaler": "eventbridge"} {
		t.Run(component, func(t *testing.T) {
			nc, err := natsconn.Connect(srv.ClientURL(), natsconn.Options{Name: "kfn-" + component, Credentials: natsconn.Credentials{
				User: "kfn-" + component, PasswordFile: n.passwordFile(t, component),
			}})
			require.NoError(t, err)
			t.Cleanup(nc.Close)
			require.Eventually(t, nc.IsConnected, 10*time.Second, 10*time.Millisecond)
			assert.True(t, strings.HasPrefix(nc.NewInbox(), "_INBOX.kfn-"+component+"."), "its inboxes: %s", nc.NewInbox())
			js, err := jetstream.New(nc)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err = js.AccountInfo(ctx)
			require.NoError(t, err, "JetStream answers it on its own inbox")
			require.NoError(t, nc.LastError())

			for _, subject := range []string{"_INBOX.kfn-" + other + ".>", "_INBOX.kfn-" + other + ".abc", "_INBOX.>"} {
				sub, err := nc.SubscribeSync(subject)
				require.NoError(t, err)
				require.NoError(t, nc.Flush())
				require.Eventually(t, func() bool {
					err := nc.LastError()
					return errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), `"`+subject+`"`)
				}, 10*time.Second, 10*time.Millisecond, "%s's user may not subscribe to %s", component, subject)
				_ = sub.Unsubscribe()
				_, err = js.AccountInfo(ctx)
				require.NoError(t, err, "and its connection still works")
			}
		})
	}
}

// TestNATSEventBridgeUserRunsTheBridge runs the event bridge (publisher,
// dispatcher, admin API) with the chart's arguments as its user against
// the chart's NATS configuration: it makes its streams and consumers,
// stores and delivers an event, keeps a failed one as a dead letter and
// replays it (the lock bucket, the replay subject), and publishes the
// gateway's in-flight reports the scaler's user receives, and its
// dependency cache stores and reads an object in its bucket. The scaler's
// user reads the backlog of the consumers, is woken by an event, and
// cannot publish an in-flight report, an event, delete a stream or open
// the dependency bucket.
// Fails when a rule the bridge or the scaler needs is taken out of the
// configuration, or when the scaler is allowed one it must not have.
func TestNATSEventBridgeUserRunsTheBridge(t *testing.T) {
	n, r := renderedNATS(t, nil)
	srv := n.startSingle(t)

	var delivered, failed atomic.Int32
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Ce-Type") == "order.failed.v1" {
			failed.Add(1)
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		delivered.Add(1)
	}))
	t.Cleanup(sink.Close)
	manifest := filepath.Join(t.TempDir(), "subscriptions.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(`apiVersion: eventing.kyma-project.io/v1alpha2
kind: Subscription
metadata: {name: orders, namespace: default}
spec:
  sink: "http://orders.default.svc.cluster.local"
  source: shop
  types: [order.created.v1, order.failed.v1]
  config: {maxDeliver: "1"}
`), 0o600))

	p := eventbridge.DefaultProcess()
	fs := flag.NewFlagSet("eventbridge", flag.ContinueOnError)
	p.RegisterFlags(fs)
	require.NoError(t, fs.Parse(container(t, r.deployments["kfn-eventbridge"]).Args), "the chart's arguments")
	require.Equal(t, "kfn-eventbridge", p.NATS.User)
	// The same process without Kubernetes, on loopback, with one server.
	require.NoError(t, fs.Parse([]string{
		"-nats-url=" + srv.ClientURL(), "-nats-password-file=" + n.passwordFile(t, "eventbridge"),
		"-components=publisher,dispatcher", "-subscriptions=" + manifest, "-leader-election=false",
		"-listen=" + testport.Addr(t), "-admin-listen=" + testport.Addr(t), "-admin-auth=none", "-metrics-listen=",
		"-publisher-senders=none", "-stream-replicas=1", "-resolve=orders.default=" + sink.URL,
	}))
	p.Dispatcher.Egress.AllowLoopback = true
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eventbridge.Run(ctx, p, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(20 * time.Second):
			t.Error("the event bridge did not stop")
		}
	})
	require.Eventually(t, func() bool { return get(t, "http://"+p.Listen+"/readyz") == http.StatusOK }, 30*time.Second, 20*time.Millisecond,
		"the bridge made its streams and consumers and is ready")

	// The scaler's user listens for events of the Subscription.
	scalerErrs := make(chan error, 4)
	scalerNC := n.connectAs(t, srv, "scaler", scalerErrs)
	woken := make(chan struct{}, 1)
	stop, err := activity.NewNATSListener(scalerNC).Listen([]string{"kyma.shop.order.created.v1"}, func() { woken <- struct{}{} })
	require.NoError(t, err)
	t.Cleanup(stop)

	require.Equal(t, http.StatusNoContent, publish(t, p.Listen, "1", "order.created.v1"))
	require.Eventually(t, func() bool { return delivered.Load() == 1 }, 20*time.Second, 20*time.Millisecond, "delivered")
	select {
	case <-woken:
	case <-time.After(10 * time.Second):
		t.Fatal("the scaler's user did not see the event")
	}
	require.Equal(t, http.StatusNoContent, publish(t, p.Listen, "2", "order.failed.v1"))
	require.Eventually(t, func() bool { return strings.Contains(body(t, "http://"+p.AdminListen+"/deadletters"), `"2"`) }, 20*time.Second, 20*time.Millisecond,
		"the failed event is a dead letter")
	resp, err := http.Post("http://"+p.AdminListen+"/deadletters/replay?namespace=default&subscription=orders", "", nil)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	require.Eventually(t, func() bool { return failed.Load() == 2 }, 20*time.Second, 20*time.Millisecond, "the dead letter replayed to the sink")

	// The gateway's in-flight reports: the bridge's user sends, the
	// scaler's receives.
	reports := make(chan *nats.Msg, 1)
	sub, err := scalerNC.ChanSubscribe(inflight.DefaultSubject, reports)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	require.NoError(t, scalerNC.Flush())
	bridgeErrs := make(chan error, 4)
	bridgeNC := n.connectAs(t, srv, "eventbridge", bridgeErrs)
	require.NoError(t, bridgeNC.Publish(inflight.DefaultSubject, []byte("{}")))
	require.NoError(t, bridgeNC.Flush())
	select {
	case <-reports:
	case <-time.After(10 * time.Second):
		t.Fatal("the bridge's in-flight report did not reach the scaler's user")
	}
	assert.Empty(t, bridgeErrs, "the bridge's user may send reports")

	// The dependency cache, as the bridge's user: it makes its bucket,
	// stores an object of 12 MB and reads it back (large enough that
	// reading it needs flow control). (No API server
	// here: the senders name one namespace; the NATS rules are under test.)
	bridgeJS, err := jetstream.New(bridgeNC)
	require.NoError(t, err)
	cache, err := depcache.New(bridgeJS, jsstream.DependencyBucketConfig(p.Streams), oneNamespace("team-a"), oneNamespace("team-a"), depcache.DefaultConfig())
	require.NoError(t, err)
	cacheCtx, stopCache := context.WithCancel(ctx)
	cacheDone := make(chan struct{})
	go func() { cache.Run(cacheCtx, 10*time.Millisecond); close(cacheDone) }()
	t.Cleanup(func() { stopCache(); <-cacheDone })
	cacheSrv := httptest.NewServer(cache)
	t.Cleanup(cacheSrv.Close)
	object := append([]byte{0x1f, 0x8b}, bytes.Repeat([]byte("dependencies"), 1_000_000)...)
	objectURL := cacheSrv.URL + depcache.PathPrefix + "nodejs24/" + strings.Repeat("ab", 32)
	req, err := http.NewRequest(http.MethodPut, objectURL, bytes.NewReader(object))
	require.NoError(t, err)
	req.Header.Set(runtimes.DependencyWriterHeader, "an install container's writer token")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode, "the bridge's user stores dependencies: %s", b)
	resp, err = http.Get(objectURL)
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, object, b, "and reads them back")
	assert.Empty(t, bridgeErrs)

	// The scaler's user reads the consumers' backlog: the JetStream API it
	// calls.
	js, err := jetstream.New(scalerNC)
	require.NoError(t, err)
	backlogs, err := activity.NewJetStreamReader(js, p.Streams).Backlogs(ctx)
	require.NoError(t, err, "the scaler's user lists the event stream's consumers")
	assert.Len(t, backlogs, 1, "the Subscription's consumer")

	// ...and nothing else.
	require.NoError(t, scalerNC.Publish(inflight.DefaultSubject, []byte("{}")))
	require.NoError(t, scalerNC.Flush())
	select {
	case err := <-scalerErrs:
		assert.ErrorIs(t, err, nats.ErrPermissionViolation)
		assert.ErrorContains(t, err, inflight.DefaultSubject)
	case <-time.After(10 * time.Second):
		t.Fatal("the scaler's user published an in-flight report")
	}
	select {
	case m := <-reports:
		t.Fatalf("the scaler's forged report arrived: %s", m.Data)
	case <-time.After(200 * time.Millisecond):
	}
	require.NoError(t, scalerNC.Publish("kyma.shop.order.created.v1", []byte("{}")))
	require.NoError(t, scalerNC.Flush())
	select {
	case err := <-scalerErrs:
		assert.ErrorIs(t, err, nats.ErrPermissionViolation, "the scaler's user may not publish events")
	case <-time.After(10 * time.Second):
		t.Fatal("the scaler's user published an event")
	}
	dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
	defer dcancel()
	require.Error(t, js.DeleteStream(dctx, p.Streams.EventStream), "the scaler's user may not delete a stream")
	_, err = js.ObjectStore(dctx, p.Streams.DependencyBucket)
	require.Error(t, err, "the scaler's user may not open the dependency bucket")
	_, err = js.Stream(ctx, p.Streams.EventStream)
	require.NoError(t, err, "the stream is still there")
	assert.Equal(t, int32(1), delivered.Load(), "nothing was delivered twice")
}

// oneNamespace says every request comes from one namespace's
// ServiceAccount.
type oneNamespace string

func (n oneNamespace) SenderNamespace(*http.Request) (string, error) { return string(n), nil }

// WriterNamespace takes every writer token as n's.
func (n oneNamespace) WriterNamespace(context.Context, string, string) (string, error) {
	return string(n), nil
}

func get(t *testing.T, u string) int {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func body(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func publish(t *testing.T, addr, id, typ string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/publish", strings.NewReader(`{}`))
	require.NoError(t, err)
	for k, v := range map[string]string{"Ce-Specversion": "1.0", "Ce-Id": id, "Ce-Source": "shop", "Ce-Type": typ, "Content-Type": "application/json"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// TestNATSRoutesNeedThePassword starts the chart's 3 servers from its
// configuration and environment (the route URLs carry the routes'
// password), each on loopback ports: they form one cluster, in which an R3
// stream is made; a route that connects without the password is refused.
// Fails when the cluster block has no authorization (the stranger's route
// is then taken) or the route URLs lack the password (no cluster forms).
func TestNATSRoutesNeedThePassword(t *testing.T) {
	n, _ := renderedNATS(t, nil)
	servers := startCluster(t, n, nil)
	nc := n.connectAs(t, servers[0], "eventbridge", make(chan error, 1))
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var lastErr error
	require.Eventually(t, func() bool {
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		defer rcancel()
		_, lastErr = js.CreateOrUpdateStream(rctx, jetstream.StreamConfig{Name: "kfn-events", Subjects: []string{"kyma.>"}, Replicas: 3})
		if lastErr != nil {
			t.Log(lastErr)
		}
		return lastErr == nil
	}, 30*time.Second, 100*time.Millisecond, "an R3 stream on the 3 servers: %v", &lastErr)

	// A stranger that speaks the route protocol without the password.
	conn, err := net.Dial("tcp", servers[0].ClusterAddr().String())
	require.NoError(t, err)
	defer conn.Close()
	rd := bufio.NewReader(conn)
	line, err := rd.ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, "INFO "), line)
	_, err = fmt.Fprintf(conn, "CONNECT {\"verbose\":false,\"name\":\"stranger\",\"cluster\":%q}\r\nPING\r\n", "kfn-nats")
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	var answer string
	for !strings.HasPrefix(answer, "-ERR") && err == nil {
		answer, err = rd.ReadString('\n')
	}
	assert.Contains(t, answer, "Authorization Violation", "a route without the password")
}

// startCluster starts the chart's servers, each with its configuration
// and environment, on loopback ports: the route URLs keep their user and
// password but point at the other servers' ports. tlsName, if set, is the
// name the routes' TLS checks (the server's certificate names the
// headless Service's hosts, not loopback).
func startCluster(t *testing.T, n chartNATS, tlsName func(i int) string) []*server.Server {
	t.Helper()
	const size = 3
	clusterPorts := make([]int, size)
	for i := range clusterPorts {
		clusterPorts[i] = testport.Port(t)
	}
	servers := make([]*server.Server, size)
	opts := make([]*server.Options, size)
	for i := range size {
		o := n.options(t, i, t.TempDir())
		require.Len(t, o.Routes, size, "a route to every server")
		for j, r := range o.Routes {
			require.Equal(t, fmt.Sprintf("kfn-nats-%d.kfn-nats-headless.kfn-system.svc.cluster.local", j), r.Hostname())
			require.Equal(t, "kfn-route", r.User.Username(), "the route URL has the routes' user")
			moved := *r
			moved.Host = "127.0.0.1:" + strconv.Itoa(clusterPorts[j])
			o.Routes[j] = &moved
		}
		o.Cluster.Host, o.Cluster.Port = "127.0.0.1", clusterPorts[i]
		if tlsName != nil {
			require.NotNil(t, o.Cluster.TLSConfig, "routes over TLS")
			o.Cluster.TLSConfig.ServerName = tlsName(i)
		}
		opts[i] = o
	}
	done := make(chan *server.Server, size)
	for i := range size {
		srv, err := server.NewServer(opts[i])
		require.NoError(t, err)
		servers[i] = srv
		if !opts[i].NoLog {
			srv.ConfigureLogger()
		}
		go func() { srv.Start(); done <- srv }()
		t.Cleanup(func() {
			srv.Shutdown()
			srv.WaitForShutdown()
		})
	}
	for range size {
		<-done
	}
	for _, srv := range servers {
		require.True(t, srv.ReadyForConnections(30*time.Second))
	}
	require.Eventually(t, func() bool {
		for _, srv := range servers {
			if srv.NumRoutes() < size-1 {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "every server routes to the 2 others")
	return servers
}

// TestNATSTLS renders the chart with nats.tls.enabled: its certificate
// Secret is served by the configuration; a client that does not know the
// CA is refused, one given ca.crt (the components' -nats-ca-file) is taken
// with its user; the 3 servers route to each other over TLS, each showing
// the certificate (routes need a password and the CA). Fails without the
// tls blocks (the client without the CA is then taken) or with a
// certificate that does not name the servers.
func TestNATSTLS(t *testing.T) {
	vals := map[string]any{"nats": map[string]any{"tls": map[string]any{"enabled": true}}}
	n, r := renderedNATS(t, vals)
	require.NotNil(t, n.tlsFiles, "the chart makes the certificate")
	for _, component := range []string{"eventbridge", "scaler"} {
		assert.Contains(t, container(t, r.deployments["kfn-"+component]).Args, "-nats-ca-file=/etc/kfn/nats/ca.crt", component)
	}
	srv := n.startSingle(t)
	u, err := url.Parse(srv.ClientURL())
	require.NoError(t, err)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(caFile, n.tlsFiles["ca.crt"], 0o600))
	// The client asks for the Service's name; the dialer takes it to
	// loopback.
	serviceURL := "nats://kfn-nats.kfn-system.svc.cluster.local:" + u.Port()
	dialer := nats.SetCustomDialer(loopbackDialer{})
	user := nats.UserInfo("kfn-scaler", n.passwords["scaler"])

	_, err = nats.Connect(serviceURL, dialer, user)
	require.Error(t, err, "plain text is refused")
	_, err = nats.Connect(serviceURL, dialer, user, nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12}))
	assert.ErrorContains(t, err, "certificate signed by unknown authority", "a client without the CA")
	nc, err := nats.Connect(serviceURL, dialer, user, nats.RootCAs(caFile))
	require.NoError(t, err, "the components' CA file")
	assert.True(t, nc.TLSRequired())
	nc.Close()
	_, err = nats.Connect(serviceURL, dialer, nats.RootCAs(caFile))
	assert.ErrorIs(t, err, nats.ErrAuthorization, "TLS does not replace the password")

	servers := startCluster(t, n, func(i int) string {
		return fmt.Sprintf("kfn-nats-%d.kfn-nats-headless.kfn-system.svc.cluster.local", i)
	})
	// The route port speaks TLS only, to a peer that shows a certificate
	// of the CA.
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(n.tlsFiles["ca.crt"]))
	cert, err := tls.X509KeyPair(n.tlsFiles["tls.crt"], n.tlsFiles["tls.key"])
	require.NoError(t, err)
	routeInfo := func(certs []tls.Certificate) (string, error) {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", servers[0].ClusterAddr().String(), &tls.Config{
			RootCAs: pool, ServerName: "kfn-nats-0.kfn-nats-headless.kfn-system.svc.cluster.local", Certificates: certs, MinVersion: tls.VersionTLS12,
		})
		if err != nil {
			return "", err
		}
		defer conn.Close()
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
		return bufio.NewReader(conn).ReadString('\n')
	}
	info, err := routeInfo([]tls.Certificate{cert})
	require.NoError(t, err, "a peer with the servers' certificate")
	assert.True(t, strings.HasPrefix(info, "INFO "), info)
	_, err = routeInfo(nil)
	assert.Error(t, err, "a peer without a certificate")
	plain, err := net.Dial("tcp", servers[0].ClusterAddr().String())
	require.NoError(t, err)
	defer plain.Close()
	require.NoError(t, plain.SetReadDeadline(time.Now().Add(10*time.Second)))
	line, _ := bufio.NewReader(plain).ReadString('\n')
	assert.NotContains(t, line, "INFO", "no plain text on the route port")
}

type loopbackDialer struct{}

func (loopbackDialer) Dial(network, address string) (net.Conn, error) {
	_, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	return (&net.Dialer{Timeout: 5 * time.Second}).Dial(network, net.JoinHostPort("127.0.0.1", port))
}

// TestNATSCredentialValues renders the other ways to the credentials: a
// Secret of the user's own for the chart's NATS, auth off, and an external
// NATS whose user, password and CA come from its Secret. Each component
// mounts only its own password.
func TestNATSCredentialValues(t *testing.T) {
	volume := func(t *testing.T, r rendered, component string) map[string]string {
		t.Helper()
		items := map[string]string{}
		for _, v := range r.deployments["kfn-"+component].Spec.Template.Spec.Volumes {
			if v.Name != "nats-client" {
				continue
			}
			for _, src := range v.Projected.Sources {
				for _, it := range src.Secret.Items {
					items[it.Path] = src.Secret.Name + "/" + it.Key
				}
			}
		}
		return items
	}
	t.Run("default", func(t *testing.T) {
		r := typed(t, render(t, nil))
		assert.Equal(t, map[string]string{"password": "kfn-nats-auth/eventbridge"}, volume(t, r, "eventbridge"))
		assert.Equal(t, map[string]string{"password": "kfn-nats-auth/scaler"}, volume(t, r, "scaler"))
		assert.NotEmpty(t, r.statefulSets["kfn-nats"].Spec.Template.Annotations["checksum/auth"], "NATS restarts when the passwords change")
	})
	t.Run("existing secret", func(t *testing.T) {
		r := typed(t, render(t, map[string]any{"nats": map[string]any{"auth": map[string]any{"existingSecret": "my-passwords"}, "tls": map[string]any{"enabled": true, "existingSecret": "my-cert"}}}))
		assert.Nil(t, find(r.objs, "Secret", "kfn-nats-auth"), "no Secret of the chart's")
		assert.Nil(t, find(r.objs, "Secret", "kfn-nats-tls"))
		assert.Equal(t, map[string]string{"password": "my-passwords/scaler", "ca.crt": "my-cert/ca.crt"}, volume(t, r, "scaler"))
		env := r.statefulSets["kfn-nats"].Spec.Template.Spec.Containers[0].Env
		assert.Contains(t, fmt.Sprint(env), "my-passwords")
	})
	t.Run("auth off", func(t *testing.T) {
		r := typed(t, render(t, map[string]any{"nats": map[string]any{"auth": map[string]any{"enabled": false}}}))
		assert.Nil(t, find(r.objs, "Secret", "kfn-nats-auth"))
		assert.Empty(t, volume(t, r, "eventbridge"))
		assert.NotContains(t, r.configMaps["kfn-nats"].Data["nats.conf"], "authorization")
		assert.NotContains(t, strings.Join(container(t, r.deployments["kfn-eventbridge"]).Args, " "), "-nats-user")
	})
	t.Run("external", func(t *testing.T) {
		r := typed(t, render(t, map[string]any{"nats": map[string]any{"enabled": false}, "externalNATS": map[string]any{
			"existingSecret": "nats-credentials", "user": "kfn", "passwordKey": "password", "caKey": "ca.crt",
		}}))
		for _, component := range []string{"eventbridge", "scaler"} {
			args := container(t, r.deployments["kfn-"+component]).Args
			assert.Contains(t, args, "-nats-user=kfn")
			assert.Contains(t, args, "-nats-password-file=/etc/kfn/nats/password")
			assert.Contains(t, args, "-nats-ca-file=/etc/kfn/nats/ca.crt")
			assert.Equal(t, map[string]string{"password": "nats-credentials/password", "ca.crt": "nats-credentials/ca.crt"}, volume(t, r, component))
		}
		r = typed(t, render(t, map[string]any{"nats": map[string]any{"enabled": false}, "externalNATS": map[string]any{"existingSecret": "nats-credentials", "credsKey": "user.creds"}}))
		assert.Contains(t, container(t, r.deployments["kfn-scaler"]).Args, "-nats-creds-file=/etc/kfn/nats/nats.creds")
	})
}

// TestNATSSecretsKeptAcrossUpgrades installs (server dry-run, with
// lookups) twice with TLS on: each rendering without the Secrets in the
// cluster makes new passwords and certificates; once the first
// installation's Secrets are there, a rendering (helm upgrade) keeps them,
// and NATS's checksums do not change, so NATS does not restart. Fails when
// the template does not read the Secrets back.
func TestNATSSecretsKeptAcrossUpgrades(t *testing.T) {
	if testing.Short() {
		t.Skip("asks an API server")
	}
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := fmt.Sprintf("kfn-nats-upgrade-%d", time.Now().UnixNano())
	require.NoError(t, c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	vals := map[string]any{"nats": map[string]any{"tls": map[string]any{"enabled": true}}}
	secrets := func() ([]*unstructured.Unstructured, map[string]string) {
		objs, err := decode(helmInstall(t, ns, vals).Manifest)
		require.NoError(t, err)
		var out []*unstructured.Unstructured
		for _, o := range objs {
			if o.GetKind() == "Secret" && strings.Contains(o.GetName(), "-nats-") {
				out = append(out, o)
			}
		}
		require.Len(t, out, 2, "the passwords and the certificate")
		sts := typed(t, objs).statefulSets["kfnalias-nats"]
		require.NotNil(t, sts)
		return out, sts.Spec.Template.Annotations
	}
	first, firstAnn := secrets()
	again, againAnn := secrets()
	assert.NotEqual(t, first[0].Object["data"], again[0].Object["data"], "nothing in the cluster: new passwords")
	assert.NotEqual(t, firstAnn["checksum/auth"], againAnn["checksum/auth"])
	for _, o := range first {
		o = o.DeepCopy() // as helm install leaves it
		o.SetAnnotations(map[string]string{"meta.helm.sh/release-name": aliasRelease, "meta.helm.sh/release-namespace": ns})
		o.SetLabels(map[string]string{"app.kubernetes.io/managed-by": "Helm"})
		require.NoError(t, c.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(fieldOwner)))
	}
	upgraded, upgradedAnn := secrets()
	for i := range first {
		assert.Equal(t, first[i].Object["data"], upgraded[i].Object["data"], "%s kept", first[i].GetName())
	}
	for _, k := range []string{"checksum/auth", "checksum/tls", "checksum/config"} {
		assert.Equal(t, firstAnn[k], upgradedAnn[k], "%s: NATS does not restart", k)
	}
}
