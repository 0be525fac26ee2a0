"""Error reasons and their gRPC status codes, read once from the one table,
protos/concord/error/v1/error.proto (docs/errors.md). No grpc import, so the
server's domain errors (which primitives raise) can share it with the client's."""

from __future__ import annotations

from .error.v1 import error_pb2 as _table


def reason_name(value: _table.Reason) -> str:
    """A reason as it travels in an ErrorInfo: REASON_LOCK_NOT_HELD -> "LOCK_NOT_HELD"."""
    return _table.Reason.Name(value).removeprefix("REASON_")


def _codes() -> dict[str, str]:
    table = {}
    for value in _table.Reason.DESCRIPTOR.values:
        if value.number:
            code = value.GetOptions().Extensions[_table.status]
            table[reason_name(value.number)] = _table.Code.Name(code).removeprefix("CODE_")
    return table


CODE_NAMES: dict[str, str] = _codes()
"""Every reason of error.proto -> the name of its gRPC status code ("FAILED_PRECONDITION")."""
