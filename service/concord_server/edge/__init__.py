"""The gRPC edge: what stands between the port and the servicers (api/).

The listening port (tls.py) and the server interceptors, outermost first: tracing
(tracing.py), the RPC metrics (rpc_metrics.py), auth (auth.py), limits (limits.py).
Each interceptor wraps the method handler through handlers.wrap, the one place that
switches on a handler's kind; auth and limits are guards (guard.py). methods.py says
which methods are open to all and which may block.
"""
