"""The web console (``--console-listen``): an aiohttp server on its own address in the
server process, over the same primitives, tokens and tenants as the gRPC API.

One idea per module: app.py (the aiohttp application, its routes and actions),
auth.py (who may do what: edge/auth.py's Identity), sessions.py (log in with an
API token; sessions kept in Redis; the login throttle), views.py (what a page shows, read through the primitives app.py built),
live.py (one snapshot per tenant per interval, pushed to every viewer over
Server-Sent Events, with a cap on open streams), static/ (the page, bundled).

aiohttp is imported only when the console is on.
"""
