"""Generate the protobuf and gRPC code from protos/ (it is built, never committed).

hatchling runs this hook for every build (sdist, wheel, editable), so a wheel built from a
clean checkout or from the sdist ships ``sessiontodo/v1/*_pb2*.py`` and their typed stubs.
``make setup`` runs the same file as a script (``python hatch_build.py``): one way to generate.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PROTOS = Path(__file__).resolve().parent / "protos"


def _plugin(name: str) -> str:
    """A protoc plugin of mypy-protobuf, from this interpreter's environment."""
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} not found: install mypy-protobuf (a build requirement)")
    return found


def generate(protos: Path = PROTOS) -> list[Path]:
    """Run protoc on every .proto under ``protos``; returns the generated files."""
    sources = sorted(protos.rglob("*.proto"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{protos}",
            f"--plugin=protoc-gen-mypy={_plugin('protoc-gen-mypy')}",
            f"--plugin=protoc-gen-mypy_grpc={_plugin('protoc-gen-mypy_grpc')}",
            f"--python_out={protos}",
            f"--mypy_out={protos}",
            f"--grpc_python_out={protos}",
            f"--mypy_grpc_out={protos}",
            *map(str, sources),
        ],
        check=True,
    )
    return [
        source.with_name(source.stem + suffix)
        for source in sources
        for suffix in ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py", "_pb2_grpc.pyi")
    ]


class ProtocHook(BuildHookInterface):  # type: ignore[type-arg]
    """hatchling's custom build hook (``[tool.hatch.build.hooks.custom]``)."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        generate(Path(self.root) / "protos")


if __name__ == "__main__":
    generate()
