package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestLoggedServes: the step is the timestamp of the host's own line for
// the Function, not of another Function's line or of an earlier line.
func TestLoggedServes(t *testing.T) {
	log := "2026-11-27T04:25:58.100000000Z kfn: standby host listening on 8080\n" +
		"2026-11-27T04:25:58.200000000Z kfn: function bench/cold-10 loaded on standby host in 2.0 ms (its handler in 1.0 ms)\n" +
		"2026-11-27T04:25:58.873930558Z kfn: function bench/cold-1 loaded on standby host in 8.9 ms (its handler in 5.9 ms)\n" +
		"2026-11-27T04:25:58.900000000Z handling x\n"
	at, ok := loggedServes(log, "bench/cold-1")
	assert.True(t, ok)
	assert.Equal(t, time.Date(2026, 11, 27, 4, 25, 58, 873930558, time.UTC), at)
	_, ok = loggedServes(log, "bench/cold-2")
	assert.False(t, ok, "no line for the Function")
	_, ok = loggedServes("not a timestamp kfn: function bench/cold-1 loaded on standby host\n", "bench/cold-1")
	assert.False(t, ok, "a line without a timestamp")
}
