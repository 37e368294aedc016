"""The host's settings, read from the environment."""

import os

# Module names the host itself uses; a function module may not have them.
HOST_MODULES = ('kfnhost', 'kfn_main')


class ConfigError(Exception):
    """A configuration value from the environment is invalid."""


def _number(env, name, default, minimum, integer=False):
    raw = env.get(name, '')
    if raw == '':
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        value = None
    if value is None or value < minimum or value != value:
        kind = 'an integer' if integer else 'a number'
        raise ConfigError('invalid %s=%r: want %s >= %s' % (name, raw, kind, minimum))
    return value


class Config:
    """The host's settings, read from the environment."""

    def __init__(self, env):
        self.function_name = env.get('FUNC_NAME', '')
        self.namespace = env.get('SERVICE_NAMESPACE', '')
        self.runtime = env.get('FUNC_RUNTIME', '')
        self.port = _number(env, 'FUNC_PORT', 8080, 0, integer=True)
        self.listen_fd = _number(env, 'KFN_LISTEN_FD', None, 3, integer=True)
        self.function_dir = os.path.abspath(env.get('KFN_FUNCTION_DIR') or '/usr/src/app/function')
        source = env.get('KFN_SOURCE_DIR', '')
        self.source_dir = os.path.abspath(source) if source else ''
        deps = env.get('KFN_DEPS_DIR', '')
        self.deps_dir = os.path.abspath(deps) if deps else ''
        self.module_name = env.get('MOD_NAME') or 'handler'
        self.handler_name = env.get('FUNC_HANDLER') or 'main'
        self.timeout = _number(env, 'FUNC_TIMEOUT', 180.0, 0.001)
        # Kyma's Python variable and unit: bytes, default 100 MiB (bottle's
        # MEMFILE_MAX). REQ_MB_LIMIT is the Node.js host's.
        self.body_limit = _number(env, 'FUNC_MEMFILE_MAX', 100 * 1024 * 1024, 1, integer=True)
        self.memory_limit = env.get('FUNC_MEMORY_LIMIT')
        self.publisher = env.get('PUBLISHER_PROXY_ADDRESS', '')
        self.publisher_token = env.get('PUBLISHER_TOKEN', '')
        self.trace_endpoint = env.get('TRACE_COLLECTOR_ENDPOINT', '')
        if self.module_name in HOST_MODULES:
            raise ConfigError('MOD_NAME=%s is the name of a host module' % self.module_name)
