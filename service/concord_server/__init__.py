"""Concord server: coordination primitives over gRPC, kept in Redis."""

__version__ = "0.1.0"
