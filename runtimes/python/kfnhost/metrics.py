"""Function metrics in the Prometheus text format."""

import threading

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 180)


def _label(method):
    """The method label value, escaped as the text format requires."""
    return method.replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n')


class _Series:
    __slots__ = ('calls', 'failures', 'sum', 'counts')

    def __init__(self):
        self.calls = 0
        self.failures = 0
        self.sum = 0.0
        self.counts = [0] * (len(BUCKETS) + 1)


class Metrics:
    """Calls, failures and a duration histogram in the Prometheus text
    format, each labelled with the request's HTTP method as Kyma's Python
    runtime labels them (method="GET"), so that dashboards written for Kyma
    read kfn's pods unchanged."""

    def __init__(self):
        self.lock = threading.Lock()
        self.series = {}

    def observe(self, method, seconds, failed):
        i = 0
        n = len(BUCKETS)
        while i < n and seconds > BUCKETS[i]:
            i += 1
        with self.lock:
            s = self.series.get(method)
            if s is None:
                s = self.series[method] = _Series()
            s.calls += 1
            if failed:
                s.failures += 1
            s.sum += seconds
            s.counts[i] += 1

    def render(self):
        with self.lock:
            snapshot = sorted((m, s.calls, s.failures, s.sum, list(s.counts)) for m, s in self.series.items())
        calls = [
            '# HELP function_calls_total Number of calls to the user function.',
            '# TYPE function_calls_total counter',
        ]
        failures = [
            '# HELP function_failures_total Number of user function calls that raised or timed out.',
            '# TYPE function_failures_total counter',
        ]
        durations = [
            '# HELP function_duration_seconds Duration of user function calls in seconds.',
            '# TYPE function_duration_seconds histogram',
        ]
        for method, n, failed, total, counts in snapshot:
            m = _label(method)
            calls.append('function_calls_total{method="%s"} %d' % (m, n))
            failures.append('function_failures_total{method="%s"} %d' % (m, failed))
            cumulative = 0
            for b, c in zip(BUCKETS, counts):
                cumulative += c
                durations.append('function_duration_seconds_bucket{method="%s",le="%s"} %d' % (m, b, cumulative))
            cumulative += counts[-1]
            durations.append('function_duration_seconds_bucket{method="%s",le="+Inf"} %d' % (m, cumulative))
            durations.append('function_duration_seconds_sum{method="%s"} %r' % (m, total))
            durations.append('function_duration_seconds_count{method="%s"} %d' % (m, cumulative))
        return ('\n'.join(calls + failures + durations) + '\n').encode()
