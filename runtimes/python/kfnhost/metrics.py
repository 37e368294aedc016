"""Function metrics in the Prometheus text format."""

import threading

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 180)


class Metrics:
    """Calls, failures and a duration histogram in the Prometheus text format."""

    def __init__(self):
        self.lock = threading.Lock()
        self.calls = 0
        self.failures = 0
        self.sum = 0.0
        self.counts = [0] * (len(BUCKETS) + 1)

    def observe(self, seconds, failed):
        i = 0
        n = len(BUCKETS)
        while i < n and seconds > BUCKETS[i]:
            i += 1
        with self.lock:
            self.calls += 1
            if failed:
                self.failures += 1
            self.sum += seconds
            self.counts[i] += 1

    def render(self):
        with self.lock:
            calls, failures, total, counts = self.calls, self.failures, self.sum, list(self.counts)
        lines = [
            '# HELP function_calls_total Number of calls to the user function.',
            '# TYPE function_calls_total counter',
            'function_calls_total %d' % calls,
            '# HELP function_failures_total Number of user function calls that raised or timed out.',
            '# TYPE function_failures_total counter',
            'function_failures_total %d' % failures,
            '# HELP function_duration_seconds Duration of user function calls in seconds.',
            '# TYPE function_duration_seconds histogram',
        ]
        cumulative = 0
        for b, c in zip(BUCKETS, counts):
            cumulative += c
            lines.append('function_duration_seconds_bucket{le="%s"} %d' % (b, cumulative))
        cumulative += counts[-1]
        lines.append('function_duration_seconds_bucket{le="+Inf"} %d' % cumulative)
        lines.append('function_duration_seconds_sum %r' % total)
        lines.append('function_duration_seconds_count %d' % cumulative)
        return ('\n'.join(lines) + '\n').encode()
