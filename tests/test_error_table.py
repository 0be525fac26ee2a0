"""One error table: every reason, its gRPC status and its meaning are declared once,
in protos/concord/error/v1/error.proto. These tests fail when anything else that
names reasons disagrees with it: the server (the reasons it can send and their
codes), the Python client's exceptions, the Go client's sentinels, the Node
client's table and types, and docs/errors.md (generated: `make proto`).
"""

from __future__ import annotations

import ast
import importlib.util
import io
import json
import re
import sys
import tokenize
from pathlib import Path

import grpc
import pytest

import concord.errors as client_errors
import concord_server.errors as server_errors
from concord.error.v1 import error_pb2
from test_polyglot import GO_CLIENT, NODE_CLIENT, go, node, run

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "service" / "concord_server"
PYTHON_CLIENT = ROOT / "clients" / "python" / "concord"


def _gen_errors():
    spec = importlib.util.spec_from_file_location("gen_errors", ROOT / "docs" / "gen_errors.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks itself up there
    spec.loader.exec_module(module)
    return module


GEN = _gen_errors()
REASONS = GEN.load()  # from the .proto file itself, not from generated code
TABLE = {r.name: r.status for r in REASONS}


def test_the_table_is_well_formed():
    assert len(TABLE) == len(REASONS) >= 30, "a reason is declared twice"
    assert len({r.number for r in REASONS}) == len(REASONS)
    for r in REASONS:
        assert re.fullmatch(r"[A-Z][A-Z0-9_]*", r.name), r
        assert grpc.StatusCode[r.status].value[0] == r.code, f"{r.name}: Code numbers follow gRPC's"
        assert r.status not in ("OK", "UNKNOWN"), f"{r.name}: a client never sees {r.status}"
        assert r.meaning and r.section, f"{r.name} needs a comment saying what it means, under a section"
    # error.proto's Code enum is gRPC's codes, number for number.
    for value in error_pb2.Code.DESCRIPTOR.values:
        if value.number:
            assert grpc.StatusCode[value.name.removeprefix("CODE_")].value[0] == value.number, value.name


def test_the_generated_python_module_matches_the_proto():
    """The committed stubs are fresh (tests/test_stubs.py); this checks the option too."""
    assert server_errors.STATUS == TABLE
    assert {k: v.name for k, v in client_errors.STATUS.items()} == TABLE


def _string_literals(path: Path) -> list[tuple[int, str]]:
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type == tokenize.STRING and "f" not in tok.string.split(tok.string[-1], 1)[0].lower():
            value = ast.literal_eval(tok.string)
            if isinstance(value, str) and re.fullmatch(r"[A-Z_]+", value):
                found.append((tok.start[0], value))
    return found


def _reason_literals(root: Path, skip: tuple[str, ...] = ()) -> list[str]:
    """Reasons spelled out as string literals: each should come from error.proto's enum.
    The general reasons share their names with gRPC codes, which code may name."""
    specific = {name for name, status in TABLE.items() if name != status}
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.name.endswith(("_pb2.py", "_pb2_grpc.py")) or path.name in skip:
            continue
        found += [f"{path.relative_to(ROOT)}:{line}: {text}" for line, text in _string_literals(path)
                  if text in specific]
    return found


def test_the_server_sends_exactly_the_reasons_of_the_table():
    classes = [server_errors.ConcordError]
    for cls in classes:
        classes.extend(cls.__subclasses__())
    by_class = {cls.reason: cls for cls in classes
                if "reason" in cls.__dict__ and cls.__module__ == server_errors.__name__}
    for reason, cls in by_class.items():
        assert TABLE.get(reason) == cls.code, f"{cls.__name__}: {reason} is {cls.code}, not {TABLE.get(reason)}"
    # The limits name theirs (LimitReached takes the enum value) in edge/limits.py.
    limits = set(re.findall(r"\bREASON_([A-Z_]+)\b", (SERVER / "edge" / "limits.py").read_text()))
    assert limits and all(TABLE[r] == "RESOURCE_EXHAUSTED" for r in limits)
    assert set(by_class) | limits == set(TABLE), (
        f"in error.proto but never sent: {sorted(set(TABLE) - set(by_class) - limits)}")
    assert not _reason_literals(SERVER), "name reasons by error.proto's enum, not by a string"


def test_a_class_whose_code_disagrees_with_the_table_fails_at_import():
    with pytest.raises(TypeError, match="LOCK_NOT_HELD the code FAILED_PRECONDITION"):
        type("Wrong", (server_errors.NotFound,), {"reason": "LOCK_NOT_HELD"})
    with pytest.raises(TypeError, match="not in protos/concord/error/v1/error.proto"):
        type("Unknown", (server_errors.FailedPrecondition,), {"reason": "NO_SUCH_REASON"})
    with pytest.raises(TypeError, match="FAILED_PRECONDITION"):
        type("Wrong", (client_errors.NotFound,), {"reason": "LOCK_NOT_HELD"})
    with pytest.raises(ValueError, match="not a RESOURCE_EXHAUSTED reason"):
        server_errors.LimitReached("x", error_pb2.REASON_LOCK_NOT_HELD, None)


class _RpcError(grpc.RpcError):
    """A failed call as grpcio reports it, with the server's status details."""

    def __init__(self, code: grpc.StatusCode, reason: str) -> None:
        from google.protobuf import any_pb2
        from google.rpc import error_details_pb2, status_pb2

        detail = any_pb2.Any()
        detail.Pack(error_details_pb2.ErrorInfo(reason=reason, domain="concord", metadata={"name": "x"}))
        self._code = code
        self._trailers = (("grpc-status-details-bin",
                           status_pb2.Status(code=code.value[0], message="m", details=[detail]).SerializeToString()),)

    def code(self):
        return self._code

    def details(self):
        return "m"

    def trailing_metadata(self):
        return self._trailers


def test_the_python_client_maps_every_reason_to_an_exception_of_its_code():
    for name, status in TABLE.items():
        code = grpc.StatusCode[status]
        exc = client_errors.from_rpc_error(_RpcError(code, name))
        assert (exc.code, exc.reason, exc.metadata) == (code, name, {"name": "x"}), name
        settled = client_errors.from_reason(name, "m")
        assert (type(settled), settled.code, settled.reason) == (type(exc), code, name), name
    classes = [client_errors.ConcordError]
    for cls in classes:
        classes.extend(cls.__subclasses__())
    for cls in classes:
        if "reason" in cls.__dict__ and cls.reason and cls.__module__ == client_errors.__name__:
            assert TABLE.get(cls.reason) == cls.code.name, cls
    assert not _reason_literals(PYTHON_CLIENT), "name reasons by error.proto's enum"


def test_the_go_client_has_a_sentinel_per_reason_with_its_code():
    """TestErrorTable (clients/go/errors_test.go) checks the Go sentinels against
    the table read here from error.proto, so stale Go stubs fail too."""
    table = {r.name: r.code for r in REASONS}
    run([go(), "test", "-count=1", "-run", "^TestErrorTable$", "."], cwd=GO_CLIENT,
        env={"CONCORD_ERROR_TABLE": json.dumps(table)}, timeout=240)


def test_the_node_client_reads_the_table_and_types_it():
    out = run([node(), "--input-type=module", "-e",
               "import { reasons } from './src/index.js'; console.log(JSON.stringify(reasons()));"],
              cwd=NODE_CLIENT, timeout=60)
    node_table = json.loads(out.strip().splitlines()[-1])
    assert {k: v["status"] for k, v in node_table.items()} == TABLE
    assert {k: v["code"] for k, v in node_table.items()} == {r.name: r.code for r in REASONS}
    types = (NODE_CLIENT / "src" / "services.d.ts").read_text()
    union = types.split("export type Reason =", 1)[1].split(";", 1)[0]
    assert re.findall(r"'([A-Z_]+)'", union) == [r.name for r in REASONS], (
        "clients/node/src/services.d.ts is stale: run `make proto`")


def test_docs_errors_md_is_the_table():
    assert (ROOT / "docs" / "errors.md").read_text() == GEN.render(REASONS), (
        "docs/errors.md is stale: run `make proto` (docs/gen_errors.py)")
    text = (ROOT / "docs" / "errors.md").read_text()
    assert all(f"| `{name}` | {status} " in text for name, status in TABLE.items())
