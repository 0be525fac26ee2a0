"""Regenerate the Python gRPC stubs (with .pyi type stubs) from protos/.

    python clients/python/gen_stubs.py [OUT_DIR]

OUT_DIR defaults to clients/python, where the stubs are committed; tests/test_stubs.py
generates into a temporary directory and fails when the committed files differ.
"""

from __future__ import annotations

import sys
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parents[2]
PROTOS = ROOT / "protos"
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py", "_pb2_grpc.pyi")


def proto_files() -> list[str]:
    return sorted(str(p.relative_to(PROTOS)) for p in PROTOS.rglob("*.proto"))


def generate(out_dir: Path) -> list[Path]:
    """Writes the stubs under out_dir and returns the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    include = Path(protoc.__file__).parent / "_proto"
    args = [
        "protoc",
        f"-I{PROTOS}",
        f"-I{include}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        f"--plugin=protoc-gen-mypy_grpc={Path(sys.executable).parent / 'protoc-gen-mypy_grpc'}",
        f"--mypy_grpc_out={out_dir}",
        *proto_files(),
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    written = [p for p in out_dir.rglob("*") if p.name.endswith(GENERATED_SUFFIXES)]
    # Every generated directory is a regular package so setuptools finds it.
    for d in {p.parent for p in written}:
        while d != out_dir:
            (d / "__init__.py").touch()
            d = d.parent
    return written


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "clients" / "python")
