package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"
)

// recorder is an HTTP server on the node's address, which the test
// functions call (POST /record with {"fn":..., "id":...}) for every event or
// request they handle: how a test learns what reached a pod, across pods
// that come and go. Pods reach the node's address through the bridge; it
// is not reachable from outside the machine.
type recorder struct {
	// URL is what functions get in RECORDER_URL.
	URL string
	srv *http.Server

	mu   sync.Mutex
	seen map[string]map[string]int // fn -> id -> times
	pods map[string]map[string]int // fn -> pod -> reports
}

// record is one report of a function: which event or request, handled
// by which pod (its host name).
type record struct {
	Fn  string `json:"fn"`
	ID  string `json:"id"`
	Pod string `json:"pod"`
}

func startRecorder(nodeIP string) (*recorder, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(nodeIP, "0"))
	if err != nil {
		return nil, fmt.Errorf("recorder: %w", err)
	}
	r := &recorder{URL: "http://" + ln.Addr().String(), seen: map[string]map[string]int{}, pods: map[string]map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /record", func(w http.ResponseWriter, req *http.Request) {
		var rec record
		if err := json.NewDecoder(req.Body).Decode(&rec); err != nil || rec.Fn == "" {
			http.Error(w, "want {\"fn\":..., \"id\":...}", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		if r.seen[rec.Fn] == nil {
			r.seen[rec.Fn] = map[string]int{}
		}
		r.seen[rec.Fn][rec.ID]++
		if r.pods[rec.Fn] == nil {
			r.pods[rec.Fn] = map[string]int{}
		}
		r.pods[rec.Fn][rec.Pod]++
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *recorder) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
}

// counts returns how often fn reported each id.
func (r *recorder) counts(fn string) map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.seen[fn]))
	for id, n := range r.seen[fn] {
		out[id] = n
	}
	return out
}

// podCounts returns how many reports of fn came from each pod.
func (r *recorder) podCounts(fn string) map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.pods[fn]))
	for p, n := range r.pods[fn] {
		out[p] = n
	}
	return out
}

// missing returns the ids fn has not reported yet, sorted.
func (r *recorder) missing(fn string, ids []string) []string {
	got := r.counts(fn)
	var out []string
	for _, id := range ids {
		if got[id] == 0 {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// waitAll waits until fn has reported every id, or d has passed; the error
// names the ids still missing.
func (r *recorder) waitAll(ctx context.Context, fn string, ids []string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		miss := r.missing(fn, ids)
		if len(miss) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			if len(miss) > 20 {
				miss = append(miss[:20], fmt.Sprintf("... (%d in all)", len(miss)))
			}
			return fmt.Errorf("%s did not report %d of %d ids within %s: %v", fn, len(r.missing(fn, ids)), len(ids), d, miss)
		}
		select {
		case <-ctx.Done():
			return errors.New("cancelled")
		case <-time.After(100 * time.Millisecond):
		}
	}
}
