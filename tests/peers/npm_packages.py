"""This checkout's npm packages as users get them: ``npm pack``, then ``npm install`` of the tarballs
into a fresh project, offline (``make typescript`` leaves their dependencies in npm's cache)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import ROOT
from tests.system.test_packaging import run

CLIENT = ROOT / "clients" / "typescript"
OPENCODE_PLUGIN = ROOT / "clients" / "opencode-plugin"


def pack(package: Path, destination: Path) -> Path:
    """The tarball of the built package in ``package``, written into ``destination``."""
    assert (package / "dist" / "index.js").is_file(), "run `make typescript` (make test does)"
    (packed,) = json.loads(run("npm", "pack", "--json", "--pack-destination", destination, cwd=package))
    return destination / packed["filename"]


def fresh_project(project: Path, *tarballs: Path) -> Path:
    """An ESM project in ``project`` with ``tarballs`` installed from npm's cache."""
    project.mkdir(parents=True)
    (project / "package.json").write_text(json.dumps({"name": project.name, "private": True, "type": "module"}))
    run("npm", "install", "--offline", "--no-audit", "--no-fund", "--loglevel=error", *tarballs, cwd=project)
    return project
