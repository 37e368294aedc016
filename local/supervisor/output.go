package supervisor

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// How the functions' processes share one output (kfn dev's terminal):
// a process's output pipe is read by a goroutine of os/exec that hands
// its lines to a source, which never waits for the shared writer: the
// lines wait in the queue of their function (a share, bounded in bytes;
// past the bound a line is dropped and counted), and one goroutine per
// SyncWriter writes them, the functions that have lines taking turns of
// about outputQuantum bytes each (deficit round robin), and within a
// function its processes a line each in turn.
const (
	// outputBudget bounds the bytes of one function's lines waiting for
	// the shared writer.
	outputBudget = 1 << 20
	// outputQuantum is what a function's turn at the shared writer adds to
	// the bytes it may write: a line of another function waits behind at
	// most this much of each function's output, and a line longer than
	// it waits for as many turns as it needs.
	outputQuantum = 16 << 10
	// flushWait bounds how long Pool.Stop waits for the output of its
	// processes to be written: a terminal that takes nothing does not
	// hold up a stop for longer.
	flushWait = 2 * time.Second
	// waitDelay bounds how long the end of a process waits for its output
	// pipes to close: a child that left its process group may hold them.
	waitDelay = 3 * time.Second
)

// SyncWriter serializes writes to an io.Writer shared by many processes.
// Processes started with it (by Start or a Pool) never wait for it: their
// lines wait in a queue of their function's, bounded in bytes (past the
// bound lines are dropped, and a line of the process's says how many),
// and a goroutine of the SyncWriter writes them, the functions taking
// turns of about equal bytes, so that one function's backlog does not
// make another's lines wait behind all of it.
type SyncWriter struct {
	mu  sync.Mutex // held while out is written
	out io.Writer

	qmu     sync.Mutex // guards the fields below and those of every share and source of it
	turns   []*share   // the shares that have lines, in turn order
	writing bool       // a goroutine is writing the lines of turns
	batch   []byte     // that goroutine's buffer, kept for its next turn
}

// NewSyncWriter wraps out.
func NewSyncWriter(out io.Writer) *SyncWriter { return &SyncWriter{out: out} }

// Write writes p to the wrapped writer while holding a lock; it waits for
// the writer, and for the turn of the processes' lines being written.
func (s *SyncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.Write(p)
}

// syncWriterFor returns out when it is a SyncWriter, else a new one
// wrapping it.
func syncWriterFor(out io.Writer) *SyncWriter {
	if s, ok := out.(*SyncWriter); ok {
		return s
	}
	return NewSyncWriter(out)
}

// share is one function's share of a SyncWriter: the lines of its
// processes that wait to be written, at most outputBudget bytes of them
// (besides the few lines kfn adds).
type share struct {
	w       *SyncWriter
	queued  int             // bytes of the lines waiting in its sources
	sources []*source       // the sources that have lines, in turn order
	deficit int             // bytes it may write in its turns so far
	inTurn  bool            // in w.turns
	writing bool            // lines of it are being written
	idle    []chan struct{} // closed once it has nothing to write
}

func (w *SyncWriter) newShare() *share { return &share{w: w} }

// source is the lines of one process (or of kfn about a function), each
// written after prefix.
type source struct {
	sh      *share
	prefix  string
	lines   [][]byte // waiting, each with its prefix and newline
	dropped int      // lines dropped since the last line saying so
	inTurn  bool     // in sh.sources
}

func (sh *share) newSource(prefix string) *source { return &source{sh: sh, prefix: prefix} }

// push queues line (without its newline) to be written, or drops it when
// its function's queue is full; it never waits for the writer. It is a
// Lines.Line and never fails.
func (s *source) push(line []byte) error {
	s.add(line, false)
	return nil
}

// note queues one of kfn's lines about the process or function, also
// past its function's bound (kfn's own lines are few).
func (s *source) note(line string) { s.add([]byte(line), true) }

func (s *source) add(line []byte, force bool) {
	sh, w := s.sh, s.sh.w
	n := len(s.prefix) + len(line) + 1
	w.qmu.Lock()
	defer w.qmu.Unlock()
	if !force && sh.queued+n > outputBudget {
		s.dropped++
		return
	}
	s.noteDropped() // before this line: the dropped ones came before it
	b := make([]byte, 0, n)
	s.enqueue(append(append(append(b, s.prefix...), line...), '\n'))
	w.schedule(sh)
}

// close is called once the process's output has ended: it says how many
// of its last lines were dropped, if any were.
func (s *source) close() {
	w := s.sh.w
	w.qmu.Lock()
	defer w.qmu.Unlock()
	if s.dropped > 0 {
		s.noteDropped()
		w.schedule(s.sh)
	}
}

// noteDropped queues the line that says how many lines were dropped since
// the last one that did, if any were. The caller holds qmu and schedules
// the share.
func (s *source) noteDropped() {
	if s.dropped == 0 {
		return
	}
	what := "lines"
	if s.dropped == 1 {
		what = "line"
	}
	s.enqueue(fmt.Appendf(nil, "%skfn: %d %s dropped: the output came faster than it could be written\n", s.prefix, s.dropped, what))
	s.dropped = 0
}

// enqueue adds a line, with its prefix and newline, to the source's
// queue. The caller holds qmu.
func (s *source) enqueue(line []byte) {
	s.lines = append(s.lines, line)
	s.sh.queued += len(line)
	if !s.inTurn {
		s.inTurn = true
		s.sh.sources = append(s.sh.sources, s)
	}
}

// schedule gives sh its turns and has a goroutine write the lines. The
// caller holds qmu.
func (w *SyncWriter) schedule(sh *share) {
	if !sh.inTurn && len(sh.sources) > 0 {
		sh.inTurn = true
		w.turns = append(w.turns, sh)
	}
	if !w.writing && len(w.turns) > 0 {
		w.writing = true
		go w.run()
	}
}

// run writes the queued lines, a turn of each share at a time, until
// none is left.
func (w *SyncWriter) run() {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	for len(w.turns) > 0 {
		sh := w.turns[0]
		w.turns[0] = nil
		w.turns = w.turns[1:]
		batch := sh.take(w.batch[:0])
		if len(sh.sources) > 0 {
			w.turns = append(w.turns, sh)
		} else {
			sh.inTurn = false
		}
		if len(batch) > 0 {
			sh.writing = true
			w.qmu.Unlock()
			w.mu.Lock()
			// A writer that fails loses these lines; the processes' next
			// ones are still tried, and none of them waits for it.
			_, _ = w.out.Write(batch)
			w.mu.Unlock()
			w.qmu.Lock()
			sh.writing = false
			w.batch = batch
		}
		sh.wakeIfIdle()
	}
	w.writing = false
}

// take appends to batch the lines sh may write in this turn: its sources
// give a line each in turn, as long as the bytes the share may write
// (outputQuantum more each turn) cover the next. The caller holds qmu.
func (sh *share) take(batch []byte) []byte {
	sh.deficit += outputQuantum
	for len(sh.sources) > 0 {
		s := sh.sources[0]
		line := s.lines[0]
		if len(line) > sh.deficit {
			break // its turns to come make up the bytes
		}
		sh.deficit -= len(line)
		sh.queued -= len(line)
		batch = append(batch, line...)
		s.lines[0] = nil // the array must not hold it on
		s.lines = s.lines[1:]
		if len(s.lines) == 0 {
			s.noteDropped()
		}
		sh.sources[0] = nil
		sh.sources = sh.sources[1:]
		if len(s.lines) > 0 {
			sh.sources = append(sh.sources, s)
		} else {
			s.inTurn, s.lines = false, nil
		}
	}
	if len(sh.sources) == 0 {
		sh.deficit = 0
	}
	return batch
}

// wakeIfIdle wakes the flushes waiting for sh once it has nothing queued
// or being written. The caller holds qmu.
func (sh *share) wakeIfIdle() {
	if len(sh.sources) > 0 || sh.writing {
		return
	}
	for _, ch := range sh.idle {
		close(ch)
	}
	sh.idle = nil
}

// flush waits until the lines queued in sh have been written, or for at
// most timeout, and reports whether they have.
func (sh *share) flush(timeout time.Duration) bool {
	w := sh.w
	w.qmu.Lock()
	if len(sh.sources) == 0 && !sh.writing {
		w.qmu.Unlock()
		return true
	}
	ch := make(chan struct{})
	sh.idle = append(sh.idle, ch)
	w.qmu.Unlock()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-ch:
		return true
	case <-timer.C:
		return false
	}
}
