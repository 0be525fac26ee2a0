"""The committed Python stubs are exactly what the protos generate today."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLIENT = ROOT / "clients" / "python"


def _generator():
    spec = importlib.util.spec_from_file_location("gen_stubs", CLIENT / "gen_stubs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_stubs_are_fresh(tmp_path):
    written = _generator().generate(tmp_path)
    assert written, "no stubs generated"
    stale = []
    for fresh in written:
        rel = fresh.relative_to(tmp_path)
        committed = CLIENT / rel
        if not committed.exists() or committed.read_bytes() != fresh.read_bytes():
            stale.append(str(rel))
    assert not stale, f"stale generated stubs (run `make proto`): {stale}"
    generated = {p.relative_to(tmp_path) for p in written}
    for suffix in ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py", "_pb2_grpc.pyi"):
        leftovers = [p for p in CLIENT.rglob(f"*{suffix}") if p.relative_to(CLIENT) not in generated]
        assert not leftovers, f"stubs without a proto (delete them): {leftovers}"
