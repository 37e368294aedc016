"""Line-atomic standard streams.

Handlers run in threads, and print() writes its text and its newline in two
calls, so two handlers printing at once could produce 'line Aline B' and an
empty line. LineStream collects each thread's output until a newline and
writes whole lines under a lock, so concurrent output interleaves by line,
as one would read it in `kubectl logs` or `kfn logs`.
"""

import io
import threading


class LineStream(io.TextIOBase):
    """Wraps a text stream; write() passes on complete lines atomically and
    keeps the rest of the calling thread's line until its newline or a
    flush()."""

    def __init__(self, raw):
        super().__init__()
        self._raw = raw
        self._lock = threading.Lock()
        self._local = threading.local()

    def writable(self):
        return True

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError('write() argument must be str, not %s' % type(s).__name__)
        buf = getattr(self._local, 'buf', '') + s
        cut = buf.rfind('\n') + 1
        if cut:
            with self._lock:
                self._raw.write(buf[:cut])
                self._raw.flush()
            buf = buf[cut:]
        self._local.buf = buf
        return len(s)

    def flush(self):
        buf = getattr(self._local, 'buf', '')
        with self._lock:
            if buf:
                self._raw.write(buf)
                self._local.buf = ''
            self._raw.flush()

    def end_line(self):
        """Write what the calling thread left without a newline as a line of
        its own (the host calls this after each handler call)."""
        buf = getattr(self._local, 'buf', '')
        if buf:
            self._local.buf = ''
            with self._lock:
                self._raw.write(buf + '\n')
                self._raw.flush()

    def fileno(self):
        return self._raw.fileno()

    def isatty(self):
        return self._raw.isatty()

    @property
    def encoding(self):
        return self._raw.encoding

    @property
    def errors(self):
        return self._raw.errors


def install(sys_module):
    """Replace sys.stdout and sys.stderr by line-atomic wrappers."""
    sys_module.stdout = LineStream(sys_module.stdout)
    sys_module.stderr = LineStream(sys_module.stderr)
