package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// conn is a keep-alive HTTP/1.1 client connection that sends one fixed GET
// request and reads Content-Length-framed responses, with no allocation per
// request: cheap enough that the load generator takes as little CPU as
// possible from the servers it measures on the same cores.
type conn struct {
	c   net.Conn
	r   *bufio.Reader
	req []byte
}

func dial(addr, path string) (*conn, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	req := []byte("GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nUser-Agent: kfn-bench\r\n\r\n")
	return &conn{c: c, r: bufio.NewReaderSize(c, 16<<10), req: req}, nil
}

var errStatus = errors.New("unexpected status")

// do sends the request and reads the whole response; it returns the status.
func (c *conn) do() (int, error) {
	if _, err := c.c.Write(c.req); err != nil {
		return 0, err
	}
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, fmt.Errorf("malformed status line %q", line)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, fmt.Errorf("malformed status line %q", line)
	}
	length := -1
	for {
		h, err := c.r.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		if len(h) <= 2 {
			break
		}
		if len(h) > 16 && (h[0] == 'C' || h[0] == 'c') && bytes.EqualFold(h[:15], []byte("content-length:")) {
			length, err = strconv.Atoi(string(bytes.TrimSpace(h[15:])))
			if err != nil {
				return 0, fmt.Errorf("malformed content-length %q", h)
			}
		}
	}
	if length < 0 {
		return 0, errors.New("response without content-length")
	}
	if _, err := c.r.Discard(length); err != nil {
		return 0, err
	}
	return status, nil
}

func (c *conn) close() { c.c.Close() }

// throughput runs a closed loop of conns connections for d and returns the
// completed requests per second. Any failed request fails the measurement.
func throughput(addr string, conns int, d time.Duration) (float64, error) {
	var done atomic.Int64
	var firstErr error
	var errOnce sync.Once
	stop := make(chan struct{})
	var ready, wg sync.WaitGroup
	start := make(chan struct{})
	for range conns {
		ready.Add(1)
		wg.Go(func() {
			c, err := dial(addr, "/")
			ready.Done()
			if err != nil {
				errOnce.Do(func() { firstErr = err })
				return
			}
			defer c.close()
			<-start
			for {
				select {
				case <-stop:
					return
				default:
				}
				status, err := c.do()
				if err == nil && status != 200 {
					err = fmt.Errorf("%w %d", errStatus, status)
				}
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				done.Add(1)
			}
		})
	}
	ready.Wait()
	t0 := time.Now()
	close(start)
	time.Sleep(d)
	n := done.Load()
	elapsed := time.Since(t0)
	close(stop)
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(n) / elapsed.Seconds(), nil
}

// latencies sends requests at a fixed rate to each of addrs, on one
// keep-alive connection per server, for d, and returns each server's
// request latencies. The servers take turns within every interval (at the
// same rate each), so a noisy machine disturbs all of them alike. A request
// held back because the previous answer came late is measured from when it
// was due, so a slow answer also counts against the requests queued behind
// it; one sent late only because the generator overslept is measured from
// when it was sent.
func latencies(addrs []string, rate float64, d time.Duration) ([][]time.Duration, error) {
	conns := make([]*conn, len(addrs))
	for i, a := range addrs {
		c, err := dial(a, "/")
		if err != nil {
			return nil, err
		}
		defer c.close()
		conns[i] = c
	}
	interval := time.Duration(float64(time.Second) / rate)
	slot := interval / time.Duration(len(addrs))
	n := int(d / interval)
	out := make([][]time.Duration, len(addrs))
	t0 := time.Now()
	var prevDone time.Time
	for i := range n {
		for j, c := range conns {
			due := t0.Add(time.Duration(i)*interval + time.Duration(j)*slot)
			if wait := time.Until(due); wait > 0 {
				time.Sleep(wait)
			}
			from := time.Now()
			if prevDone.After(due) {
				from = due
			}
			status, err := c.do()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", addrs[j], err)
			}
			if status != 200 {
				return nil, fmt.Errorf("%s: %w %d", addrs[j], errStatus, status)
			}
			prevDone = time.Now()
			out[j] = append(out[j], prevDone.Sub(from))
		}
	}
	return out, nil
}

// percentile returns the p-th percentile (0..100) of ds, nearest rank.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

// probe does one GET on a fresh connection and returns the status; it is
// the readiness check of the cold-start measurement.
func probe(addr, path string) (int, error) {
	c, err := dial(addr, path)
	if err != nil {
		return 0, err
	}
	defer c.close()
	_ = c.c.SetDeadline(time.Now().Add(2 * time.Second))
	return c.do()
}
