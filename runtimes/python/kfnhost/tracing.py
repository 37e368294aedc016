"""event.tracer, and span export with OpenTelemetry when it is installed and
TRACE_COLLECTOR_ENDPOINT is set (loaded after the host listens)."""


class _NoopSpan:
    def set_attribute(self, *a, **k):
        return None

    set_attributes = add_event = set_status = update_name = record_exception = add_link = set_attribute

    def end(self, *a, **k):
        return None

    def is_recording(self):
        return False

    def get_span_context(self):
        return None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class NoopTracer:
    """event.tracer when tracing is off: every span is a no-op."""

    _span = _NoopSpan()

    def start_span(self, *a, **k):
        return self._span

    def start_as_current_span(self, *a, **k):
        return self._span


NOOP_TRACER = NoopTracer()


class Tracing:
    """OpenTelemetry, loaded after the host listens and only when
    TRACE_COLLECTOR_ENDPOINT is set and the SDK is installed."""

    def __init__(self):
        self.otel = None

    def start(self, cfg):
        try:
            from opentelemetry import context, propagate, trace
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as err:
            return 'tracing disabled: load OpenTelemetry SDK: %s' % err
        attrs = {'service.name': cfg.function_name or 'function'}
        if cfg.namespace:
            attrs['k8s.namespace.name'] = cfg.namespace
        provider = TracerProvider(resource=Resource.create(attrs))
        provider.add_span_processor(BatchSpanProcessor(
            OTLPSpanExporter(endpoint=cfg.trace_endpoint), schedule_delay_millis=1000))
        trace.set_tracer_provider(provider)
        self.otel = (context, propagate, trace, provider, provider.get_tracer('io.kfn.runtime'))
        return None

    def tracer(self):
        """The SDK's tracer while spans are exported, else a no-op tracer."""
        return self.otel[4] if self.otel is not None else NOOP_TRACER

    def scope(self, request):
        if self.otel is None:
            return None
        return _Scope(self.otel, request)

    def shutdown(self):
        if self.otel is not None:
            try:
                self.otel[3].shutdown()
            except Exception:
                pass


class _Scope:
    def __init__(self, otel, request):
        context, propagate, trace, _, tracer = otel
        self._context = context
        self._propagate = propagate
        parent = propagate.extract(dict(request.headers))
        self.span = tracer.start_span('%s %s' % (request.method, request.path), context=parent,
                                      kind=trace.SpanKind.SERVER)
        self.ctx = trace.set_span_in_context(self.span, parent)
        self.tracer = tracer
        self._trace = trace
        self._token = None

    def attach(self):
        self._token = self._context.attach(self.ctx)

    def detach(self):
        if self._token is not None:
            self._context.detach(self._token)
            self._token = None

    def inject(self, headers):
        self._propagate.inject(headers, context=self.ctx)

    def end(self, status, message=None):
        self.span.set_attribute('http.response.status_code', status)
        if status >= 500 or status == 408:
            from opentelemetry.trace import Status, StatusCode
            self.span.set_status(Status(StatusCode.ERROR, message))
        self.span.end()
