"""The trace context a handler's own HTTP requests carry, as Kyma's Python
runtime's `requests` instrumentation gives them, whether or not spans are
exported: W3C traceparent and B3 x-b3-traceid, x-b3-spanid and x-b3-sampled
(OTEL_PROPAGATORS=tracecontext,baggage,b3multi) of one client span, child of
the call's span, in the call's trace: the caller's when it sent one (W3C,
B3 multi or single header), else a new one.

The host keeps the call's context (CallTrace) in a context variable while
the handler runs (enter/leave); `requests`' Session.send is wrapped once the
handler (or anything) imported it (instrument), and adds the headers a
request does not set itself. Standard library only: the host runs without
OpenTelemetry's packages, and with them takes the span ids of the call's
exported span."""

import binascii
import contextvars
import os
import sys
import threading

_HEX = frozenset('0123456789abcdef')
_ZERO_TRACE = '0' * 32
_ZERO_SPAN = '0' * 16

_current = contextvars.ContextVar('kfn_call_trace', default=None)


def _hex(s, n):
    return isinstance(s, str) and len(s) == n and set(s) <= _HEX


def _new_id(nbytes):
    while True:
        v = binascii.hexlify(os.urandom(nbytes)).decode()
        if v != '0' * (2 * nbytes):
            return v


def parent_of(headers):
    """(trace id, span id, sampled) of the caller's context in headers (a
    mapping with lower-case names), or None: W3C traceparent first, then B3
    multi headers, then B3's single header, as OpenTelemetry's composite
    propagator extracts them. Malformed values are ignored."""
    tp = headers.get('traceparent')
    if tp:
        parts = tp.strip().lower().split('-')
        if (len(parts) >= 4 and _hex(parts[0], 2) and parts[0] != 'ff' and
                _hex(parts[1], 32) and parts[1] != _ZERO_TRACE and
                _hex(parts[2], 16) and parts[2] != _ZERO_SPAN and _hex(parts[3], 2) and
                (parts[0] != '00' or len(parts) == 4)):
            return parts[1], parts[2], bool(int(parts[3], 16) & 1)
    trace_id = (headers.get('x-b3-traceid') or '').strip().lower()
    span_id = (headers.get('x-b3-spanid') or '').strip().lower()
    if trace_id or span_id:
        b3 = _b3(trace_id, span_id, headers.get('x-b3-sampled'), headers.get('x-b3-flags'))
        if b3 is not None:
            return b3
    single = (headers.get('b3') or '').strip().lower()
    if single:
        parts = single.split('-')
        if len(parts) >= 2:
            return _b3(parts[0], parts[1], parts[2] if len(parts) > 2 else None, None)
    return None


def _b3(trace_id, span_id, sampled, flags):
    if len(trace_id) == 16:
        trace_id = '0' * 16 + trace_id
    if not (_hex(trace_id, 32) and trace_id != _ZERO_TRACE and _hex(span_id, 16) and span_id != _ZERO_SPAN):
        return None
    s = (sampled or '').strip().lower()
    return trace_id, span_id, (flags or '').strip() == '1' or s in ('1', 'true', 'd')


class CallTrace:
    """The trace context of one call: its trace, the span the call runs in,
    whether the trace is sampled. Computed from the request (or the call's
    exported span) when a handler's request first needs it."""

    __slots__ = ('_request', '_scope', '_ids')

    def __init__(self, request, scope=None):
        self._request = request
        self._scope = scope
        self._ids = None

    def ids(self):
        """(trace id, call span id, sampled), as hex strings and a bool."""
        if self._ids is None:
            self._ids = self._compute()
        return self._ids

    def _compute(self):
        if self._scope is not None:
            try:
                sc = self._scope.span.get_span_context()
                if sc is not None and sc.trace_id and sc.span_id:
                    return '%032x' % sc.trace_id, '%016x' % sc.span_id, bool(int(sc.trace_flags) & 1)
            except Exception:
                pass
        parent = parent_of(self._request.headers) if self._request is not None else None
        if parent is None:
            # No caller's trace: a new one, sampled, as OpenTelemetry's
            # default sampler (parentbased_always_on) decides.
            return _new_id(16), _new_id(8), True
        trace_id, _, sampled = parent
        return trace_id, _new_id(8), sampled

    def outgoing(self):
        """The headers of one outgoing request: a client span of its own,
        child of the call's span, in W3C and B3 multi-header form."""
        trace_id, _, sampled = self.ids()
        span_id = _new_id(8)
        return (
            ('traceparent', '00-%s-%s-%s' % (trace_id, span_id, '01' if sampled else '00')),
            ('x-b3-traceid', trace_id),
            ('x-b3-spanid', span_id),
            ('x-b3-sampled', '1' if sampled else '0'),
        )


def enter(request, scope=None):
    """Make request's trace context the current call's, for the requests the
    handler makes on this thread; returns the token for leave. Wraps
    `requests` first when it was imported since."""
    if not _instrumented and 'requests.sessions' in sys.modules:
        instrument()
    return _current.set(CallTrace(request, scope))


def leave(token):
    """End the call entered with token."""
    _current.reset(token)


def current():
    """The CallTrace of the call running on this thread, or None."""
    return _current.get()


_instrumented = False
_lock = threading.Lock()


def instrument():
    """Wrap requests.Session.send, once, so that every request made while a
    call runs carries its trace context (headers the request sets itself
    are left as they are). Without `requests` it does nothing."""
    global _instrumented
    with _lock:
        if _instrumented:
            return
        try:
            from requests import sessions
        except Exception:
            return
        original = sessions.Session.send

        def send(self, request, **kwargs):
            call = _current.get()
            if call is not None:
                headers = request.headers
                if not any(h in headers for h in ('traceparent', 'x-b3-traceid', 'b3')):
                    for name, value in call.outgoing():
                        headers[name] = value
            return original(self, request, **kwargs)

        send.__wrapped__ = original
        sessions.Session.send = send
        _instrumented = True
