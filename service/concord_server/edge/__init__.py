"""The gRPC edge: what stands between the port and the servicers (api/).

The listening port (tls.py) and the server interceptors, outermost first: the
first-message timeout (first_message.py), tracing (tracing.py), the RPC metrics
(rpc_metrics.py), auth (auth.py: tokens, roles, and revocation.py, which ends open
calls a reloaded token file no longer allows), limits (limits.py). Each interceptor
wraps the method handler through handlers.wrap, the one place that switches on a
handler's kind; auth and limits are guards (guard.py). methods.py says which methods
are open to all, which may block and which role each needs. The per-connection
limits of the gRPC core (streams, backlog, rapid reset) are app.server_options.
"""
