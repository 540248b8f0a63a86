"""Generate the protobuf and gRPC code from protos/ (it is built, never committed).

hatchling runs this hook for every build (sdist, wheel, editable), so a wheel built from a
clean checkout or from the sdist ships ``sessiontodo/v1/*_pb2*.py`` and their typed stubs.
``make setup`` runs the same file as a script (``python hatch_build.py``): one way to generate.

``protos/sessiontodo_etcd/`` holds etcd's own API protos, verbatim from etcd v3.4.23 (Apache-2.0,
its LICENSE beside them), for the etcd store. They import gogoproto and google.api annotations,
which only etcd's Go build uses: the build strips those and points the imports at the vendored
copies, then generates from the stripped text. Their proto packages (``etcdserverpb``…) stay
etcd's, since they name the rpcs on the wire; the Python modules live under ``sessiontodo_etcd``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PROTOS = Path(__file__).resolve().parent / "protos"
ETCD = "sessiontodo_etcd"

_ETCD_IMPORTS = {
    "etcd/mvcc/mvccpb/kv.proto": f"{ETCD}/mvccpb/kv.proto",
    "etcd/auth/authpb/auth.proto": f"{ETCD}/authpb/auth.proto",
}
_ANNOTATION_LINES = [
    re.compile(r'^import "(gogoproto/gogo|google/api/annotations)\.proto";\n', re.MULTILINE),
    re.compile(r"^option \(gogoproto\.\w+\) = \w+;\n", re.MULTILINE),
]
_HTTP_OPTION = re.compile(r"\s*option \(google\.api\.http\) = \{")
_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py", "_pb2_grpc.pyi")


def _plugin(name: str) -> str:
    """A protoc plugin of mypy-protobuf, from this interpreter's environment."""
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} not found: install mypy-protobuf (a build requirement)")
    return found


def strip_etcd_annotations(text: str) -> str:
    """An etcd proto without its Go-only annotations, importing the vendored copies."""
    for annotation in _ANNOTATION_LINES:
        text = annotation.sub("", text)
    while found := _HTTP_OPTION.search(text):  # its body nests braces (additional_bindings)
        depth, end = 1, found.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            end += 1
        text = text[: found.start()] + text[end:].removeprefix(";")
    for original, vendored in _ETCD_IMPORTS.items():
        text = text.replace(f'import "{original}";', f'import "{vendored}";')
    if "gogoproto" in text or "google.api" in text or 'import "etcd/' in text:
        raise RuntimeError("an etcd proto holds an annotation or import the build does not strip")
    return text


def _protoc(include: Path, out: Path, sources: list[Path]) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{include}",
            f"--plugin=protoc-gen-mypy={_plugin('protoc-gen-mypy')}",
            f"--plugin=protoc-gen-mypy_grpc={_plugin('protoc-gen-mypy_grpc')}",
            f"--python_out={out}",
            f"--mypy_out={out}",
            f"--grpc_python_out={out}",
            f"--mypy_grpc_out={out}",
            *map(str, sources),
        ],
        check=True,
    )


def generate(protos: Path = PROTOS) -> list[Path]:
    """Run protoc on every .proto under ``protos``; returns the generated files."""
    vendored = sorted((protos / ETCD).rglob("*.proto"))
    own = sorted(source for source in protos.rglob("*.proto") if source not in vendored)
    _protoc(protos, protos, own)
    with tempfile.TemporaryDirectory(prefix="sessiontodo-etcd-protos-") as scratch:
        stripped = []
        for source in vendored:
            copy = Path(scratch) / source.relative_to(protos)
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text(strip_etcd_annotations(source.read_text()))
            stripped.append(copy)
        _protoc(Path(scratch), protos, stripped)
    return [source.with_name(source.stem + suffix) for source in own + vendored for suffix in _SUFFIXES]


class ProtocHook(BuildHookInterface):  # type: ignore[type-arg]
    """hatchling's custom build hook (``[tool.hatch.build.hooks.custom]``)."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        generate(Path(self.root) / "protos")


if __name__ == "__main__":
    generate()
