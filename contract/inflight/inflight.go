package inflight

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// DefaultSubject is the core NATS subject of in-flight reports.
const DefaultSubject = "kfn.scaler.inflight"

// Bounds of a report.
const (
	// MaxTTL is the longest validity a report may claim.
	MaxTTL = time.Minute
	// MaxFunctions is the most Functions one report may count.
	MaxFunctions = 10000
)

// ErrInvalidReport is wrapped by every error of [Decode].
var ErrInvalidReport = errors.New("invalid in-flight report")

// Report is the message on the subject: what one gateway instance has in
// flight now, replacing its previous report.
type Report struct {
	// Source names the gateway instance (unique per replica).
	Source string `json:"source"`
	// TTLMillis is how long the counts are valid, in milliseconds.
	TTLMillis int64 `json:"ttlMillis"`
	// Functions are the counts; a Function absent has none.
	Functions []Count `json:"functions,omitempty"`
}

// Count is the requests in flight for one Function.
type Count struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	InFlight  int    `json:"inFlight"`
}

// Reporter receives decoded reports; *activity.Scaler implements it.
type Reporter interface {
	ReportInFlight(src string, counts map[types.NamespacedName]int, ttl time.Duration)
}

// Encode returns the message of one report (Functions sorted, for stable
// output).
func Encode(src string, counts map[types.NamespacedName]int, ttl time.Duration) ([]byte, error) {
	r := Report{Source: src, TTLMillis: ttl.Milliseconds()}
	for fn, n := range counts {
		if n > 0 {
			r.Functions = append(r.Functions, Count{Namespace: fn.Namespace, Name: fn.Name, InFlight: n})
		}
	}
	sort.Slice(r.Functions, func(i, j int) bool {
		a, b := r.Functions[i], r.Functions[j]
		return a.Namespace < b.Namespace || (a.Namespace == b.Namespace && a.Name < b.Name)
	})
	data, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode in-flight report: %w", err)
	}
	return data, nil
}

// Decode parses and checks one message. The error wraps ErrInvalidReport
// and says what is wrong; nothing is returned with it.
func Decode(data []byte) (src string, counts map[types.NamespacedName]int, ttl time.Duration, err error) {
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		return "", nil, 0, fmt.Errorf("%w: %w", ErrInvalidReport, err)
	}
	if r.Source == "" {
		return "", nil, 0, fmt.Errorf("%w: no source", ErrInvalidReport)
	}
	ttl = time.Duration(r.TTLMillis) * time.Millisecond
	if ttl <= 0 || ttl > MaxTTL {
		return "", nil, 0, fmt.Errorf("%w: ttlMillis %d out of 1..%d", ErrInvalidReport, r.TTLMillis, MaxTTL.Milliseconds())
	}
	if len(r.Functions) > MaxFunctions {
		return "", nil, 0, fmt.Errorf("%w: %d functions, at most %d", ErrInvalidReport, len(r.Functions), MaxFunctions)
	}
	counts = make(map[types.NamespacedName]int, len(r.Functions))
	for _, c := range r.Functions {
		if c.Namespace == "" || c.Name == "" || c.InFlight < 0 {
			return "", nil, 0, fmt.Errorf("%w: bad count %+v", ErrInvalidReport, c)
		}
		counts[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] += c.InFlight
	}
	return r.Source, counts, ttl, nil
}
