"""The version of Concord's Python distributions: concord-client (this package, whose
build reads it from here) and concord-server, whose pyproject.toml states the same
version and requires exactly this concord-client (tests/test_packaging.py checks
that the three agree)."""

__version__ = "0.1.0"
