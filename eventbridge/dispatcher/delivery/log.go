package delivery

import (
	"context"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kfn-dev/kfn/eventbridge/eventstore"
	"github.com/kfn-dev/kfn/internal/logging"
)

// EventLog logs about one event's delivery: with the worker's keys
// (namespace, subscription, function, consumer), the event's id and
// attempt, within the lines its namespace may log
// (Config.LogLinesPerNamespace). It formats nothing for a level that is
// not enabled: most events log nothing at all.
type EventLog struct {
	log       *slog.Logger
	lines     *logging.Budget
	namespace string
	h         nats.Header
	attempt   int
}

// EventLog returns the log of the event of headers h and metadata meta.
func (d *Deliverer) EventLog(h nats.Header, meta *jetstream.MsgMetadata) EventLog {
	return EventLog{log: d.log, lines: d.s.lines, namespace: d.namespace, h: h, attempt: int(meta.NumDelivered)}
}

func (l EventLog) emit(level slog.Level, msg string, args []any) {
	ctx := context.Background()
	if !l.log.Enabled(ctx, level) {
		return
	}
	ok, dropped := l.lines.Take(l.namespace)
	if !ok {
		return
	}
	head := []any{"eventID", eventstore.Attribute(l.h, "id"), "attempt", l.attempt}
	if dropped > 0 {
		head = append(head, logging.DroppedKey, dropped)
	}
	l.log.Log(ctx, level, msg, append(head, args...)...)
}

// Debug logs msg with args at debug level.
func (l EventLog) Debug(msg string, args ...any) { l.emit(slog.LevelDebug, msg, args) }

// Info logs msg with args at info level.
func (l EventLog) Info(msg string, args ...any) { l.emit(slog.LevelInfo, msg, args) }

// Warn logs msg with args at warning level.
func (l EventLog) Warn(msg string, args ...any) { l.emit(slog.LevelWarn, msg, args) }

// Error logs msg with args at error level.
func (l EventLog) Error(msg string, args ...any) { l.emit(slog.LevelError, msg, args) }

// Settle logs err, the failure to settle an event, if any: the event
// comes back after the ack wait, so at least once still holds.
func Settle(log EventLog, err error) {
	if err != nil {
		log.Warn("settling event failed", "error", err)
	}
}
