"""The generated code in strand/v1 is exactly what `make proto` produces from proto/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_code_is_up_to_date(tmp_path: Path) -> None:
    protos = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "proto/strand/v1").glob("*.proto"))
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-I", "proto", f"--python_out={tmp_path}",
         f"--pyi_out={tmp_path}", f"--grpc_python_out={tmp_path}", *protos],
        cwd=ROOT, check=True,
    )
    generated = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.py*"))
    assert generated, "protoc produced nothing"
    stale = [str(p) for p in generated if (ROOT / p).read_bytes() != (tmp_path / p).read_bytes()]
    assert not stale, f"run `make proto`: {stale} differ from the .proto files"


def test_error_codes_match_the_library() -> None:
    from strand.errors import ErrorCode
    from strand.v1 import common_pb2

    for code in ErrorCode:
        assert common_pb2.ErrorCode.Value(code.name) == code.value, code
