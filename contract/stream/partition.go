package stream

import (
	"hash/fnv"
	"strconv"
	"strings"
)

// Partitions of the event stream.
//
// Events are spread over Config.Partitions streams, so that no one
// stream's leader (one NATS server) carries every event of the cluster.
// Partition 0 is the event stream as it always was: its name is
// Config.EventStream and its subjects are EventSubjects (kyma.> and the
// replay subjects), so an installation of one partition is unchanged.
// Partition p >= 1 is the stream "<EventStream>-<p>", which takes events
// published on PartitionSubjectPrefix.<p>.<event subject> and stores them
// under the event subject itself (a subject transform), so that every
// partition holds the same subjects and a Subscription's consumer has the
// same name and filter subjects in each.
//
// An event's partition is a hash of its partition key (the CloudEvents
// extension partitionkey) or, without one, of its event subject (source
// and type): the events of one key, or of one type without a key, are in
// one stream, in the order they were stored, and JetStream's
// de-duplication (per stream) sees an event published again.

// MaxPartitions bounds Config.Partitions.
const MaxPartitions = 16

// PartitionSubjectPrefix starts the subjects a partition p >= 1 takes:
// PartitionSubjectPrefix.<p>.<event subject>.
const PartitionSubjectPrefix = "kfn.p"

// PartitionCount is the number of partitions events are spread over: c.Partitions,
// and 1 for the zero value.
func (c Config) PartitionCount() int { return max(c.Partitions, 1) }

// PartitionStream is the name of partition p's stream: EventStream for
// partition 0, "<EventStream>-<p>" otherwise.
func (c Config) PartitionStream(p int) string {
	if p == 0 {
		return c.EventStream
	}
	return c.EventStream + "-" + strconv.Itoa(p)
}

// PartitionStreams are the names of the streams of every partition, in
// partition order.
func (c Config) PartitionStreams() []string {
	names := make([]string, c.PartitionCount())
	for p := range names {
		names[p] = c.PartitionStream(p)
	}
	return names
}

// PartitionNumber is the partition whose stream is named name, and false
// when no partition's stream has that name (of MaxPartitions, whatever
// c.Partitions: a partition taken away keeps its name while it is
// drained).
func (c Config) PartitionNumber(name string) (int, bool) {
	if name == c.EventStream {
		return 0, true
	}
	rest, ok := strings.CutPrefix(name, c.EventStream+"-")
	if !ok {
		return 0, false
	}
	p, err := strconv.Atoi(rest)
	if err != nil || p < 1 || p >= MaxPartitions || strconv.Itoa(p) != rest {
		return 0, false
	}
	return p, true
}

func (c Config) partitionNamed(name string) bool {
	_, ok := c.PartitionNumber(name)
	return ok
}

// PartitionSubjects are the subjects partition p's open stream takes:
// EventSubjects for partition 0, PartitionSubjectPrefix.<p>.> otherwise.
func PartitionSubjects(p int) []string {
	if p == 0 {
		return EventSubjects()
	}
	return []string{partitionPrefix(p) + ">"}
}

// PublishSubject is the subject on which an event of the given event
// subject is published to be stored in partition p: the subject itself in
// partition 0, PartitionSubjectPrefix.<p>.<subject> otherwise.
func PublishSubject(p int, subject string) string {
	if p == 0 {
		return subject
	}
	return partitionPrefix(p) + subject
}

func partitionPrefix(p int) string {
	return PartitionSubjectPrefix + "." + strconv.Itoa(p) + "."
}

// MaxPublishPrefixLength is the longest prefix PublishSubject adds to an
// event subject: what the bound of a stored subject leaves for the event's.
var MaxPublishPrefixLength = len(partitionPrefix(MaxPartitions - 1))

// PartitionOf is the partition of an event: a hash of key (its partition
// key) or, when key is empty, of subject (its event subject), over
// PartitionCount partitions. It is the same in every process and release,
// so that every replica of the publisher stores an event of a key in the
// same stream.
func (c Config) PartitionOf(subject, key string) int {
	n := c.PartitionCount()
	if n == 1 {
		return 0
	}
	if key == "" {
		key = subject
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(key)) // a hash.Hash never fails a write
	return int(h.Sum64() % uint64(n))
}
