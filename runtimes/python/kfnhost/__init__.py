"""kfn Python function host: serves a Kyma handler, main(event, context), over HTTP.

Standard library only. One thread per connection (handlers are ordinary
blocking functions), HTTP/1.1 keep-alive, TCP_NODELAY, no per-request logging.
The contract (environment, routes, signals) is documented in runtimes/README.md.
Run it with kfn_main.py.
"""
