"""Process lifecycle: configuration, loading the handler, listening, signals."""

import importlib
import os
import select
import signal
import socket
import sys
import threading
import time

from .config import Config, ConfigError
from .event import configure_emit
from .lines import install as install_line_streams
from . import standby
from .server import NOT_LOADED, Server
from .tracing import Tracing


class _Drain(BaseException):
    """Raised in the main thread by SIGTERM/SIGINT to leave the accept loop."""


def listen(cfg):
    if cfg.listen_fd is not None:
        sock = socket.socket(fileno=cfg.listen_fd)
        sock.listen(1024)
        return sock
    if socket.has_dualstack_ipv6():
        return socket.create_server(('', cfg.port), family=socket.AF_INET6, dualstack_ipv6=True, backlog=1024)
    return socket.create_server(('', cfg.port), backlog=1024)


def signal_wakeup():
    """Return a socket that becomes readable when a signal with a Python
    handler arrives. The kernel may deliver a process's SIGTERM to any of its
    threads, while Python runs handlers only in the main thread, at its next
    bytecode: a main thread blocked in accept() would sleep through a SIGTERM
    that a connection's thread took. The accept loop waits on this socket
    too, and whichever thread took the signal writes to it."""
    wake, notify = socket.socketpair()
    wake.setblocking(False)
    notify.setblocking(False)
    signal.set_wakeup_fd(notify.fileno(), warn_on_full_buffer=False)
    return wake, notify


def accept_loop(lsock, wake, serve):
    """Accept connections on lsock, each served by serve on its own thread,
    until a signal handler raises; wake is signal_wakeup()'s socket."""
    lsock.setblocking(False)
    poller = select.poll()
    poller.register(lsock, select.POLLIN)
    poller.register(wake, select.POLLIN)
    wake_fd = wake.fileno()
    Thread = threading.Thread
    while True:
        # Interrupted in the main thread, poll runs the handler itself;
        # woken by wake, the handler runs at the next bytecode.
        for fd, _ in poller.poll():
            if fd == wake_fd:
                try:
                    wake.recv(64)
                except OSError:
                    pass
                continue
            try:
                sock, addr = lsock.accept()
            except BlockingIOError:
                continue  # the client went away before accept
            except OSError as err:
                sys.stderr.write('kfn: accept: %s\n' % err)
                time.sleep(0.01)
                continue
            Thread(target=serve, args=(sock, addr), daemon=True).start()


def copy_sources(source, target):
    """Copy the regular files of source into target (the function's writable
    directory), replacing what is there. Names starting with '..' are a
    ConfigMap volume's own bookkeeping and are skipped; its files are
    symbolic links into them, which are followed."""
    if not source or os.path.abspath(source) == os.path.abspath(target):
        return
    import shutil
    for name in os.listdir(source):
        if name.startswith('..'):
            continue
        src = os.path.join(source, name)
        if not os.path.isfile(src):
            continue
        dst = os.path.join(target, name)
        if os.path.lexists(dst):
            os.unlink(dst)
        shutil.copyfile(src, dst)


def configure_sdk(cfg, tracing):
    """Put the sdk module python314 handlers import (import sdk) first on
    sys.path, as Kyma's runtime does, and configure it."""
    from .requestapi import api_dir
    sys.path.insert(0, api_dir())
    import sdk
    timeout = int(cfg.timeout) if cfg.timeout == int(cfg.timeout) else cfg.timeout
    limit = int(cfg.body_limit_mb) if cfg.body_limit_mb == int(cfg.body_limit_mb) else cfg.body_limit_mb
    sdk._configure(cfg.function_name, cfg.namespace, cfg.runtime, timeout, limit, tracing.tracer)


def load_handler(cfg):
    """Copy the source into the function's directory (KFN_SOURCE_DIR), run
    in it, set FUNCTION_PATH to it (as Kyma does), import the handler module
    and return its handler function: main(event, context), or for the
    request API an App that runs main() in Flask."""
    try:
        copy_sources(cfg.source_dir, cfg.function_dir)
    except OSError as err:
        raise OSError('copy the source from %s into %s: %s' % (cfg.source_dir, cfg.function_dir, err)) from err
    os.chdir(cfg.function_dir)
    os.environ['FUNCTION_PATH'] = cfg.function_dir
    sys.path.insert(0, cfg.function_dir)
    if cfg.deps_dir:
        site = os.path.join(cfg.deps_dir, 'site-packages')
        if site not in sys.path:
            sys.path.insert(1, site)
    if cfg.api == 'request':
        from .requestapi import import_flask
        import_flask()
    module = importlib.import_module(cfg.module_name)
    handler = getattr(module, cfg.handler_name, None)
    if not callable(handler):
        raise ConfigError('%s exports no function "%s"' % (getattr(module, '__file__', cfg.module_name), cfg.handler_name))
    if cfg.api == 'request':
        from .requestapi import App
        return App(handler, cfg)
    return handler


# The libraries Kyma's Python image provides to handlers (libs/requirements.txt),
# and the Debian package of each, where there is one.
KYMA_LIBRARIES = {'requests': 'python3-requests', 'bottle': 'python3-bottle',
                  'cloudevents': None, 'prometheus_client': 'python3-prometheus-client',
                  'flask': 'python3-flask'}


def library_hint(err):
    """How to get a library Kyma's image provides that is missing here (kfn
    dev, or an image built without PyPI), or ''."""
    name = getattr(err, 'name', None) or ''
    top = name.split('.', 1)[0]
    if not isinstance(err, ModuleNotFoundError) or top not in KYMA_LIBRARIES:
        return ''
    hint = " (Kyma's Python image provides %s: install it for this python3 with 'pip install %s'" % (top, top.replace('_', '-'))
    if KYMA_LIBRARIES[top]:
        hint += ", or on Debian 'apt-get install %s'" % KYMA_LIBRARIES[top]
    return hint + ')'


def describe_load_error(err, path):
    """The one line a readiness answer gives for a handler that did not
    load: where in the handler's own file (a syntax error's line, else the
    deepest frame in that file), the error's type and message."""
    where = path
    if isinstance(err, SyntaxError) and err.filename:
        where = '%s:%s' % (err.filename, err.lineno) if err.lineno else err.filename
        text = '%s: %s' % (type(err).__name__, err.msg)
    else:
        import traceback
        for frame in traceback.extract_tb(err.__traceback__):
            if frame.filename == path:
                where = '%s:%s' % (path, frame.lineno)
        text = '%s: %s' % (type(err).__name__, err)
    return ('%s: %s' % (where, text)).split('\n', 1)[0] + library_hint(err)


def load(cfg, tracing):
    """Configure the host for cfg and load its handler: (handler, '') or,
    when it cannot be loaded, (None, why). A handler that cannot be loaded
    does not stop the host: it serves without it, answering calls 500 "User
    function not loaded" and its readiness (/healthz?ready) 500, as Kyma's
    Node.js host does."""
    configure_emit(cfg.publisher, cfg.timeout, cfg.publisher_token, cfg.identity_token_file)
    try:
        if cfg.api == 'request':
            configure_sdk(cfg, tracing)
        return load_handler(cfg), ''
    except (Exception, SystemExit) as err:  # SyntaxError, ImportError, a module's sys.exit() ...
        import traceback
        if isinstance(err, ConfigError):
            sys.stderr.write('kfn: %s: %s\n' % (NOT_LOADED, err))
        else:
            sys.stderr.write('kfn: %s: load %s from %s:\n%s' % (
                NOT_LOADED, cfg.module_name, cfg.function_dir, ''.join(traceback.format_exception(err))))
        return None, describe_load_error(err, os.path.join(cfg.function_dir, cfg.module_name + '.py'))


def config_with(env, what):
    """The host's configuration with a request's environment over its own
    (no longer on standby); SpecializeError(400) when it is refused."""
    merged = dict(os.environ)
    merged.update(env)
    merged['KFN_STANDBY_TOKEN_SHA256'] = ''
    try:
        return Config(merged)
    except ConfigError as err:
        raise standby.SpecializeError(400, '%s: %s' % (what, err)) from None


def preparer(host_cfg, prepared):
    """The Server's prepare callback of a standby host: it fetches the
    dependency set a prepare request names into the dependency directory its
    environment gives, and notes it in prepared (runtime, hash, dir), where
    the specialize request of a Function with that set finds it."""
    def prepare(body):
        env, deps = standby.parse_preparation(body)
        cfg = config_with(env, 'prepare')
        check_dependencies(deps, host_cfg, cfg, 'prepare')
        from . import depcache
        start = time.monotonic()
        try:
            found = depcache.fetch(cfg.dependency_cache, deps['runtime'], deps['hash'], cfg.deps_dir, cfg.identity_token_file)
        except (depcache.CacheError, depcache.UnsafeEntry, ValueError, OSError) as err:
            raise standby.SpecializeError(500, 'prepare: dependencies: %s' % err) from None
        if not found:
            raise standby.SpecializeError(404, 'prepare: dependencies %s/%s are not in the dependency cache' % (deps['runtime'], deps['hash']))
        prepared.update(runtime=deps['runtime'], hash=deps['hash'], dir=cfg.deps_dir)
        print('kfn: dependencies %s/%s prepared from the cache in %d ms' % (
            deps['runtime'], deps['hash'][:12], (time.monotonic() - start) * 1000), flush=True)
        return 'prepared %s/%s' % (deps['runtime'], deps['hash'])
    return prepare


def specializer(host_cfg, tracing, started_tracing, prepared):
    """The Server's standby callback of a standby host: it checks a
    specialize request's environment against the host's configuration,
    writes its files, takes its environment and loads its handler. A request
    refused before the files are written leaves the host on standby."""
    def specialize(body):
        arrived = time.monotonic()
        env, files, deps = standby.parse(body)
        cfg = config_with(env, 'specialize')
        if cfg.api != host_cfg.api:
            raise standby.SpecializeError(400, "specialize: the handler API is the host's")
        if deps is not None:
            check_dependencies(deps, host_cfg, cfg)
        try:
            standby.write_files(cfg.function_dir, files)
        except OSError as err:
            raise standby.SpecializeError(500, 'specialize: write the files into %s: %s' % (cfg.function_dir, err)) from None
        if deps is not None:
            fetch_dependencies(deps, cfg, prepared)
        os.environ.update(env)
        load_start = time.monotonic()
        handler, load_error = load(cfg, tracing)
        if cfg.trace_endpoint and not started_tracing:
            started_tracing.append(True)
            threading.Thread(target=start_tracing, args=(tracing, cfg), name='kfn-tracing', daemon=True).start()
        if handler is not None:
            now = time.monotonic()
            print('kfn: function %s/%s loaded on standby host in %.1f ms (its handler in %.1f ms)' % (
                cfg.namespace, cfg.function_name, (now - arrived) * 1000, (now - load_start) * 1000), flush=True)
        return cfg, handler, load_error
    return specialize


def check_dependencies(deps, host_cfg, cfg, what='specialize'):
    """Refuse (400) a Function whose dependencies the host cannot fetch:
    another runtime's, or no cache or dependency directory."""
    def refuse(message):
        return standby.SpecializeError(400, '%s: dependencies: %s' % (what, message))
    if deps['runtime'] != host_cfg.runtime:
        raise refuse('runtime %s, this host runs %s' % (deps['runtime'], host_cfg.runtime or 'none'))
    if not cfg.dependency_cache:
        raise refuse('no KFN_DEPENDENCY_CACHE to fetch them from')
    if not cfg.deps_dir:
        raise refuse('no KFN_DEPS_DIR to unpack them into')


def fetch_dependencies(deps, cfg, prepared):
    """Unpack the Function's dependencies from the dependency cache into
    its KFN_DEPS_DIR, where load_handler puts them on sys.path, unless a
    prepare request left them there (prepared); another set it left is
    cleared first. Any failure (not there, unreachable, an unsafe archive)
    leaves the host serving no Function (SpecializeError, spent)."""
    from . import depcache
    if prepared.get('runtime') == deps['runtime'] and prepared.get('hash') == deps['hash'] and prepared.get('dir') == cfg.deps_dir:
        importlib.invalidate_caches()
        print('kfn: dependencies %s/%s prepared before' % (deps['runtime'], deps['hash'][:12]), flush=True)
        return
    start = time.monotonic()
    try:
        if prepared:
            depcache.empty_dir(prepared['dir'])
            prepared.clear()
        found = depcache.fetch(cfg.dependency_cache, deps['runtime'], deps['hash'], cfg.deps_dir, cfg.identity_token_file)
    except (depcache.CacheError, depcache.UnsafeEntry, ValueError, OSError) as err:
        raise standby.SpecializeError(500, 'specialize: dependencies: %s' % err, spent=True) from None
    if not found:
        raise standby.SpecializeError(500, 'specialize: dependencies: dependencies %s/%s are not in the dependency cache (404)' % (
            deps['runtime'], deps['hash']), spent=True)
    importlib.invalidate_caches()
    print('kfn: dependencies %s/%s from the cache in %d ms' % (
        deps['runtime'], deps['hash'][:12], (time.monotonic() - start) * 1000), flush=True)


# The last line of a host whose dependency set is not in the cache, and its
# exit code (runtimes.DependencyMissingMessage, DependencyMissingExit).
DEPENDENCY_MISSING_MESSAGE = 'kfn: dependency set not in the cache: '
DEPENDENCY_MISSING_EXIT = 3


def fetch_own_dependencies(cfg):
    """Fetch the Function's dependency set from the cache into its
    KFN_DEPS_DIR when the pod has no install container (KFN_DEPENDENCY_HASH),
    before the handler loads. It returns the exit code of a host that
    cannot start: DEPENDENCY_MISSING_EXIT when the cache does not have the
    set (the last line says so: the container's termination message, by
    which the controller goes back to installing), 1 when the cache could
    not be read (the kubelet starts the host again); else 0."""
    if not cfg.dependency_hash:
        return 0
    from . import depcache
    dep_set = '%s/%s' % (cfg.runtime, cfg.dependency_hash)
    start = time.monotonic()
    try:
        found = depcache.fetch_at_start(cfg.dependency_cache, cfg.runtime, cfg.dependency_hash, cfg.deps_dir, cfg.identity_token_file)
    except (depcache.CacheError, depcache.UnsafeEntry, ValueError, OSError) as err:
        sys.stderr.write('kfn: dependencies %s: the cache could not be read: %s\n' % (dep_set, err))
        return 1
    if not found:
        sys.stderr.write('%s%s\n' % (DEPENDENCY_MISSING_MESSAGE, dep_set))
        return DEPENDENCY_MISSING_EXIT
    importlib.invalidate_caches()  # the directory was empty when Python started
    print('kfn: dependencies %s/%s from the cache in %d ms' % (cfg.runtime, cfg.dependency_hash[:12], (time.monotonic() - start) * 1000), flush=True)
    return 0


def start_tracing(tracing, cfg):
    problem = tracing.start(cfg)
    if problem:
        sys.stderr.write('kfn: %s\n' % problem)
    else:
        print('kfn: tracing: exporting spans to %s' % cfg.trace_endpoint, flush=True)


def exit_before_serving(signum, frame):
    """Ends the host on a signal that comes before it serves (while it loads
    its handler, fetches its dependencies or warms up on standby): there is
    nothing to drain yet. Without it the signal would be lost: the host is
    PID 1 in its container, and PID 1 ignores a signal it has no handler
    for, so a pod deleted while its host started lived on until the
    kubelet's SIGKILL. main replaces it with the drain once it serves."""
    # os.write, not print: the signal may come while this thread holds the
    # line stream's lock in a print of its own (install_line_streams).
    os.write(1, b'kfn: %s before serving: exiting\n' % signal.Signals(signum).name.encode())
    os._exit(0)


def main():
    signal.signal(signal.SIGTERM, exit_before_serving)
    signal.signal(signal.SIGINT, exit_before_serving)
    install_line_streams(sys)
    try:
        cfg = Config(os.environ)
    except ConfigError as err:
        sys.stderr.write('kfn: %s\n' % err)
        return 1
    tracing = Tracing()
    if cfg.standby_token_hash:
        # Flask is what the request API loads first, and urllib.request what
        # a handler calling out does (about 40 ms, more under a CPU limit):
        # imported now, while the host waits, not when its Function is
        # loaded or first called (about 7 MiB more memory).
        if cfg.api == 'request':
            from .requestapi import import_flask
            import_flask()
        import urllib.request  # noqa: F401
        from . import depcache  # noqa: F401  (tarfile, for a Function with dependencies)
        handler, load_error = None, ''
        prepared = {}
        server = Server(cfg, None, '', tracing, specializer(cfg, tracing, [], prepared), preparer(cfg, prepared))
    else:
        code = fetch_own_dependencies(cfg)
        if code:
            return code
        handler, load_error = load(cfg, tracing)
        server = Server(cfg, handler, load_error, tracing)

    def on_signal(signum, frame):
        raise _Drain()

    wake, notify = signal_wakeup()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        lsock = listen(cfg)
    except OSError as err:
        sys.stderr.write('kfn: listen on port %s: %s\n' % (cfg.port, err))
        return 1
    threading.Thread(target=server.watchdog.run, name='kfn-watchdog', daemon=True).start()
    if server.standby is not None:
        print('kfn: standby host on port %d: waiting for a Function' % lsock.getsockname()[1], flush=True)
    elif handler is None:
        sys.stderr.write('kfn: function %s serving on port %d without its handler: calls are answered 500 "%s"\n' % (
            cfg.function_name or '(unnamed)', lsock.getsockname()[1], NOT_LOADED))
    else:
        print('kfn: function %s ready on port %d' % (cfg.function_name or '(unnamed)', lsock.getsockname()[1]), flush=True)
    if cfg.trace_endpoint and server.standby is None:
        threading.Thread(target=start_tracing, args=(server.tracing, cfg), name='kfn-tracing', daemon=True).start()
    try:
        accept_loop(lsock, wake, server.serve_connection)
    except _Drain:
        pass
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    lsock.close()
    signal.set_wakeup_fd(-1)
    wake.close()
    notify.close()
    ok = server.drain()
    server.tracing.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    return 0 if ok else 1
