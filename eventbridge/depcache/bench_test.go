package depcache_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/kfn-dev/kfn/contract/stream"

	"github.com/kfn-dev/kfn/eventbridge/depcache"
	"github.com/kfn-dev/kfn/internal/jsstream"
	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/test/natstest"
)

// oneNamespace names every caller's namespace: the benchmarks measure
// storing and reading, not the token reviews (cached after a token's
// first request in a cluster).
type oneNamespace string

func (n oneNamespace) SenderNamespace(*http.Request) (string, error) { return string(n), nil }

// WriterNamespace takes every writer token as n's.
func (n oneNamespace) WriterNamespace(context.Context, string, string) (string, error) {
	return string(n), nil
}

// BenchmarkRoundTrip stores an object of each size (a new hash each
// time) and reads it back through the cache's HTTP routes, on an embedded
// NATS with file storage: b.SetBytes makes go test report MB/s of the
// object (stored once, read once).
func BenchmarkRoundTrip(b *testing.B) {
	for _, size := range []int{1 << 20, 16 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			sc := stream.DefaultConfig()
			sc.DependencyMaxBytes = 1 << 30
			cfg := depcache.DefaultConfig()
			cfg.MaxNamespaceBytes, cfg.MaxNamespaceObjects = 1<<40, 1<<30
			c, err := depcache.New(natstest.Start(b).JetStream(), jsstream.DependencyBucketConfig(sc), oneNamespace("team-a"), oneNamespace("team-a"), cfg)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { c.Run(ctx, 10*time.Millisecond); close(done) }()
			defer func() { cancel(); <-done }()
			srv := httptest.NewServer(c)
			defer srv.Close()
			body := make([]byte, size)
			body[0], body[1] = 0x1f, 0x8b
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				url := fmt.Sprintf("%s%snodejs24/%064x", srv.URL, depcache.PathPrefix, i)
				req, _ := http.NewRequest(http.MethodPut, url, bytes.NewReader(body))
				req.Header.Set(runtimes.DependencyWriterHeader, "a writer token")
				resp, err := http.DefaultClient.Do(req)
				if err != nil || resp.StatusCode != http.StatusCreated {
					b.Fatalf("PUT: %v %v", err, resp)
				}
				resp.Body.Close()
				resp, err = http.Get(url)
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("GET: %v %v", err, resp)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if n != int64(size) {
					b.Fatalf("read %d bytes of %d", n, size)
				}
			}
		})
	}
}
