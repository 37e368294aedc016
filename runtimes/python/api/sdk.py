"""The sdk module of Kyma's python314 runtime, as kfn's host provides it: a
handler does `import sdk` for CloudEvents (get_cloud_event,
emit_cloud_event), tracing (get_tracer) and the function's metadata. The
host configures it before the handler is imported (_configure) and tells it
which call runs in each thread (_enter, _leave)."""

import datetime
import json
import threading
import uuid

_settings = {'function_name': '', 'namespace': '', 'runtime': 'python314', 'timeout': 180, 'body_limit_mb': 100}
_tracer_of = None
_calls = threading.local()


class InvalidCloudEvent(ValueError):
    """The request carries a CloudEvent that cannot be read (get_cloud_event)."""


def _configure(function_name, namespace, runtime, timeout, body_limit_mb, tracer_of):
    """Set what the getters report; tracer_of() returns the host's tracer
    (a no-op one while tracing is off)."""
    global _tracer_of
    _settings.update(function_name=function_name, namespace=namespace, runtime=runtime or 'python314',
                     timeout=timeout, body_limit_mb=body_limit_mb)
    _tracer_of = tracer_of


def _enter(request, scope):
    """The current thread runs a call of request (kfn's request, for its
    headers), traced by scope (None when tracing is off)."""
    _calls.current = (request, scope)


def _leave():
    _calls.current = None


def _current():
    return getattr(_calls, 'current', None)


class CloudEvent:
    """A CloudEvent read from a request, with the getters of the cloudevents
    package's CloudEvent (2.x) that Kyma's runtime returns."""

    _CORE = ('id', 'source', 'type', 'specversion', 'time', 'datacontenttype', 'dataschema', 'subject')

    def __init__(self, attributes, data=None):
        attributes = dict(attributes)
        attributes.setdefault('id', str(uuid.uuid4()))
        attributes.setdefault('specversion', '1.0')
        time = attributes.get('time')
        if time is None:
            attributes['time'] = datetime.datetime.now(datetime.timezone.utc)
        elif isinstance(time, str):
            try:
                attributes['time'] = datetime.datetime.fromisoformat(time.replace('Z', '+00:00'))
            except ValueError:
                raise InvalidCloudEvent('invalid CloudEvent time %r' % time) from None
        for name in ('type', 'source'):
            if not attributes.get(name):
                raise InvalidCloudEvent('a CloudEvent needs a %s' % name)
        self._attributes = attributes
        self._data = data

    def get_attributes(self):
        return dict(self._attributes)

    def get_id(self):
        return self._attributes['id']

    def get_source(self):
        return self._attributes['source']

    def get_type(self):
        return self._attributes['type']

    def get_specversion(self):
        return self._attributes['specversion']

    def get_time(self):
        return self._attributes['time']

    def get_datacontenttype(self):
        return self._attributes.get('datacontenttype')

    def get_dataschema(self):
        return self._attributes.get('dataschema')

    def get_subject(self):
        return self._attributes.get('subject')

    def get_extension(self, name):
        return None if name in self._CORE else self._attributes.get(name)

    def get_data(self):
        return self._data

    def __repr__(self):
        return 'CloudEvent(%r, data=%r)' % (self._attributes, self._data)


def _is_json(content_type):
    media = (content_type or '').split(';', 1)[0].strip().lower()
    return media.startswith(('application/', 'text/')) and media.endswith('json')


def _binary(headers, body):
    from urllib.parse import unquote
    attributes = {}
    for name, value in headers.items():
        lname = name.lower()
        if lname.startswith('ce-') and len(lname) > 3:
            attributes[lname[3:]] = unquote(value)
    content_type = headers.get('Content-Type')
    if content_type is not None:
        attributes['datacontenttype'] = content_type
    data = None
    if body:
        if _is_json(content_type):
            data = json.loads(body)
        else:
            try:
                data = body.decode('utf-8')
            except UnicodeDecodeError:
                data = body
    return CloudEvent(attributes, data)


def _structured(body):
    try:
        envelope = json.loads(body)
    except ValueError as err:
        raise InvalidCloudEvent('malformed structured CloudEvent: %s' % err) from None
    if not isinstance(envelope, dict):
        raise InvalidCloudEvent('a structured CloudEvent is a JSON object')
    data = envelope.pop('data', None)
    encoded = envelope.pop('data_base64', None)
    if data is None and encoded is not None:
        import base64
        data = base64.b64decode(encoded)
    return CloudEvent(envelope, data)


def get_cloud_event():
    """The CloudEvent of the current Flask request, or None when it carries
    none (neither a structured body nor ce-type and ce-source headers).
    Raises InvalidCloudEvent when it carries one that cannot be read, as
    Kyma's raises."""
    import flask
    request = flask.request
    headers = request.headers
    tokens = [t.strip().lower() for t in (headers.get('Content-Type') or '').split(';')]
    if 'application/cloudevents+json' not in tokens and not (headers.get('ce-type') and headers.get('ce-source')):
        return None
    body = request.get_data()
    if any(name.lower().startswith('ce-') for name in headers.keys()):
        return _binary(headers, body)
    return _structured(body)


def emit_cloud_event(type, source, data, optional_attributes=None):
    """Publish a CloudEvent to PUBLISHER_PROXY_ADDRESS with the trace context
    of the current call. Returns None, as Kyma's does; raises ValueError for
    an invalid type, source or attribute name, and the host's
    CloudEventError (a RuntimeError, with .response when the publisher
    answered) when the event was not published, where Kyma's would drop it
    silently."""
    from kfnhost.event import emit
    current = _current()
    request, scope = current if current is not None else (None, None)
    emit(scope, request.headers if request is not None else None, type, source, data, optional_attributes)


class _Tracer:
    """get_tracer's tracer: the current call's, looked up on every use, so a
    tracer taken while the module is imported works in every call."""

    def _tracer(self):
        current = _current()
        if current is not None and current[1] is not None:
            return current[1].tracer
        return _tracer_of()

    def start_span(self, *args, **kwargs):
        return self._tracer().start_span(*args, **kwargs)

    def start_as_current_span(self, *args, **kwargs):
        return self._tracer().start_as_current_span(*args, **kwargs)


_TRACER = _Tracer()


def get_tracer():
    """An OpenTelemetry tracer whose spans are children of the call's span
    (no-op spans while tracing is off)."""
    return _TRACER


def get_function_name():
    return _settings['function_name']


def get_namespace():
    return _settings['namespace']


def get_runtime():
    return _settings['runtime']


def get_timeout():
    """The call timeout in seconds (FUNC_TIMEOUT)."""
    return _settings['timeout']


def get_body_size_limit():
    """The request body limit in MB (FUNC_BODY_MB_LIMIT)."""
    return _settings['body_limit_mb']
