"""Concord server: coordination primitives over gRPC, kept in Redis."""

# One version for the concord-server and concord-client distributions, defined in the
# client package (which the server requires at exactly that version).
from concord._version import __version__ as __version__
