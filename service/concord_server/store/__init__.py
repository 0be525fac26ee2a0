"""The Redis layer: everything that talks to Redis, and nothing else does.

How a command reaches Redis and back. A primitive (primitives/) calls a script
wrapper (``scripts.script(name, shape)``: the Lua file in ``lua/``, its reply's
shape from ``reply_shapes``) or, for a plain read, ``client.command``. The call goes
to the process's one ``autopipeline.AutoPipeline`` (standalone Redis) or to
``cluster.ClusterCommands`` (one AutoPipeline per primary, chosen by the key's
slot). Commands issued in one event-loop turn leave in one write on one
``link.Link``, the socket's only owner, which hands each reply, in order, to its
caller's future; a caller waits for it at most until its call's gRPC deadline
(``call_deadline``) or the link's reply timeout, whichever comes first. The reply is checked against its script's shape, decoded, and a
Redis failure becomes a domain error in one place (``client``: UNAVAILABLE, or
STORAGE_FULL when Redis is out of memory), so nothing above this package sees a
redis-py exception.

Back the other way, Redis tells the server when something changes:
``notifications`` keeps one pub/sub Link per process (``cluster.ClusterBus``: one
per node) and hands each shard-channel message to the waiters that asked
(wakeups/). ``health`` pings through the same command path and sets gRPC health;
``embedded_valkey`` starts and supervises the Valkey that ``make run`` uses when no
Redis URL is given.
"""
