"""Function metrics in the Prometheus text format."""

import gc
import os
import platform
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
        return ('\n'.join(calls + failures + durations + runtime_series()) + '\n').encode()


def _family(name, kind, help_text, samples):
    """One metric family as prometheus_client writes it: HELP, TYPE, then
    each sample (labels, value) with the value as a float."""
    out = ['# HELP %s %s' % (name, help_text), '# TYPE %s %s' % (name, kind)]
    for labels, value in samples:
        text = ','.join('%s="%s"' % (k, _label(str(v))) for k, v in labels)
        out.append('%s%s %s' % (name, '{%s}' % text if text else '', _go_float(value)))
    return out


def _go_float(value):
    """A sample's value as prometheus_client writes it: Python's repr of
    the float, but with an exponent once it has more than six digits
    before the point, as Go writes it (181514240.0 is 1.8151424e+08)."""
    s = repr(float(value))
    dot = s.find('.')
    if value > 0 and dot > 6:
        mantissa = ('%s.%s%s' % (s[0], s[1:dot], s[dot + 1:])).rstrip('0.')
        return '%se+0%d' % (mantissa, dot - 1)
    return s


def _process():
    """The process's own series, read from /proc as prometheus_client's
    process collector reads them; none where /proc cannot be read."""
    try:
        with open('/proc/self/stat', 'rb') as f:
            fields = f.read().split(b')')[-1].split()
        with open('/proc/stat', 'rb') as f:
            boot = next(float(line.split()[1]) for line in f if line.startswith(b'btime'))
        ticks = os.sysconf('SC_CLK_TCK')
        page = os.sysconf('SC_PAGESIZE')
        out = []
        out += _family('process_virtual_memory_bytes', 'gauge', 'Virtual memory size in bytes.', [((), float(fields[20]))])
        out += _family('process_resident_memory_bytes', 'gauge', 'Resident memory size in bytes.', [((), float(fields[21]) * page)])
        out += _family('process_start_time_seconds', 'gauge', 'Start time of the process since unix epoch in seconds.',
                       [((), float(fields[19]) / ticks + boot)])
        out += _family('process_cpu_seconds_total', 'counter', 'Total user and system CPU time spent in seconds.',
                       [((), (float(fields[11]) + float(fields[12])) / ticks)])
        out += _family('process_open_fds', 'gauge', 'Number of open file descriptors.', [((), len(os.listdir('/proc/self/fd')))])
        with open('/proc/self/limits') as f:
            for line in f:
                if line.startswith('Max open files'):
                    out += _family('process_max_fds', 'gauge', 'Maximum number of open file descriptors.', [((), float(line.split()[3]))])
        return out
    except (OSError, ValueError, IndexError, StopIteration):
        return []


def runtime_series():
    """The series prometheus_client's default registry adds to Kyma's
    Python runtimes' /metrics, in its order: the garbage collector per
    generation, python_info, and the process (memory, CPU, start time,
    file descriptors),
    with its names and help texts, so that a dashboard or alert written for
    Kyma's pods reads kfn's."""
    stats = gc.get_stats()
    out = _family('python_gc_objects_collected_total', 'counter', 'Objects collected during gc',
                   [((('generation', i),), s['collected']) for i, s in enumerate(stats)])
    out += _family('python_gc_objects_uncollectable_total', 'counter', 'Uncollectable object found during GC',
                   [((('generation', i),), s['uncollectable']) for i, s in enumerate(stats)])
    out += _family('python_gc_collections_total', 'counter', 'Number of times this generation was collected',
                   [((('generation', i),), s['collections']) for i, s in enumerate(stats)])
    major, minor, patch = platform.python_version_tuple()
    out += _family('python_info', 'gauge', 'Python platform information',
                   [((('implementation', platform.python_implementation()), ('major', major), ('minor', minor),
                      ('patchlevel', patch), ('version', platform.python_version())), 1)])
    return out + _process()
