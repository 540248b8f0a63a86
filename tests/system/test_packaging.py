"""The project as a user installs it, outside the checkout.

The sdist and the wheel are built from a clean copy of the work tree (no generated code, no
venv), the wheel is installed into a fresh venv, and every module is imported from there and
every console script started. The declared lowest versions of the direct dependencies are
installed into another venv that runs the in-process tests (markers ``not slow and not process``):
floors that are not true fail here.
uv (a dev dependency) keeps its downloads in its cache, so a second run needs no network.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.support import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.process]

UV = Path(sys.executable).parent / "uv"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PACKAGES = (
    "sessiontodo",
    "sessiontodo_common",
    "sessiontodo_server",
    "sessiontodo_client",
    "sessiontodo_opencode",
    "sessiontodo_acp",
    "sessiontodo_ctl",
    "sessiontodo_mcp",
    "sessiontodo_web",
    "sessiontodo_claude",
)
TYPED = ("sessiontodo/v1", *PACKAGES[1:])
GENERATED = [
    f"{module}{suffix}"
    for module in ("sessiontodo/v1/todo_service", "sessiontodo_etcd/etcdserverpb/rpc", "sessiontodo_etcd/mvccpb/kv")
    for suffix in ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py", "_pb2_grpc.pyi")
]
RUNTIME_EXTRAS = "opencode,acp,mcp,redis,ctl,tracing,claude"
# The tests that run in one process and quickly: between them they touch every direct
# dependency — protobuf and grpcio everywhere, pydantic and pydantic-settings (configuration,
# OpenCode and ACP models), starlette/uvicorn/httpx (the sidecar), the ACP SDK, typer and rich
# (sessiontodoctl), OpenTelemetry, prometheus-client, jsonschema (the MCP tools); collecting them imports redis-py.
IN_PROCESS_TESTS = "not slow and not process"


def run(*command: str | Path, cwd: Path, timeout: float = 300, pythonpath: str = "") -> str:
    """Run a command outside the checkout's venv; fail with its output."""
    env = {key: value for key, value in os.environ.items() if key not in ("VIRTUAL_ENV", "PYTHONPATH")}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    result = subprocess.run(
        [str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, f"{command}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


def fresh_venv(path: Path) -> Path:
    run(UV, "venv", "--quiet", "--python", sys.executable, path, cwd=path.parent)
    return path / "bin" / "python"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(sdist, wheel) built from a copy of the tracked and new files, as a fresh clone has them."""
    copy = tmp_path_factory.mktemp("clean") / "sessiontodo"
    listed = run("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT)
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    assert not list(copy.rglob("*_pb2.py")), "generated code must not be committed"
    dist = copy.parent / "dist"
    run(UV, "build", "--quiet", "--out-dir", dist, copy, cwd=copy.parent)  # the wheel is built from the sdist
    (sdist,) = dist.glob("*.tar.gz")
    (wheel,) = dist.glob("*.whl")
    return sdist, wheel


def test_the_sdist_and_the_wheel_contain_the_generated_code_and_the_type_markers(built: tuple[Path, Path]) -> None:
    sdist, wheel = built
    with tarfile.open(sdist) as archive:
        in_sdist = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = set(archive.namelist())

    assert {f"protos/{name}" for name in GENERATED} <= in_sdist
    assert set(GENERATED) <= in_wheel
    assert {f"{package}/py.typed" for package in TYPED} <= in_wheel
    assert {"sessiontodo_web/static/index.html", "sessiontodo_web/static/assets/js/main.js"} <= in_wheel


def test_the_wheel_installs_into_a_fresh_venv_with_every_module_and_command_working(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    _, wheel = built
    python = fresh_venv(tmp_path / "venv")
    run(UV, "pip", "install", "--quiet", "--python", python, f"{wheel}[{RUNTIME_EXTRAS}]", cwd=tmp_path)

    # Every module but the __main__s (their commands are run below); sessiontodo.v1 is a namespace package.
    imported = run(
        python,
        "-c",
        "import importlib, pkgutil\n"
        f"for top in {('sessiontodo.v1', *PACKAGES[1:])!r}:\n"
        "    for module in pkgutil.walk_packages(importlib.import_module(top).__path__, top + '.'):\n"
        "        if not module.name.endswith('.__main__'):\n"
        "            print(importlib.import_module(module.name).__file__)\n",
        cwd=tmp_path,
    ).split()
    assert len(imported) > 20, imported
    assert all(path.startswith(str(tmp_path / "venv")) for path in imported), imported
    assert any(path.endswith("todo_service_pb2_grpc.py") for path in imported)

    for script in PYPROJECT["project"]["scripts"]:
        assert "usage:" in run(python.parent / script, "--help", cwd=tmp_path).lower(), script


@pytest.mark.timeout(600)
def test_the_lowest_declared_versions_pass_the_in_process_tests(built: tuple[Path, Path], tmp_path: Path) -> None:
    python = fresh_venv(tmp_path / "venv")
    extras = [f"--extra={extra}" for extra in (*RUNTIME_EXTRAS.split(","), "dev")]
    run(
        UV,
        "pip",
        "install",
        "--quiet",
        "--python",
        python,
        "--resolution=lowest-direct",
        "-r",
        ROOT / "pyproject.toml",
        *extras,
        cwd=ROOT,
    )

    # The project's metadata (its version is read at run time) from the wheel; its code from the
    # checkout's source roots, which come first, also for the server processes some tests start.
    run(UV, "pip", "install", "--quiet", "--python", python, "--no-deps", built[1], cwd=ROOT)
    source_roots = os.pathsep.join(str(ROOT / root) for root in ("protos", "server", "clients"))
    run(
        python,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-m",
        IN_PROCESS_TESTS,
        cwd=ROOT,
        timeout=500,
        pythonpath=source_roots,
    )
