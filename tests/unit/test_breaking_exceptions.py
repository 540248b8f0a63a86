"""buf breaking's exceptions (``ignore_only`` in buf.yaml) cover only breaks not yet released: each
names a file option that the released contract (protos/released.json) lacks and the proto now sets.
Once ``make proto-release`` records the option, its exception fails here and must go, so the
guard is whole again."""

from __future__ import annotations

import pytest
import yaml
from google.protobuf import descriptor_pb2, descriptor_pool, json_format

from sessiontodo.v1 import todo_service_pb2  # noqa: F401 (registers the proto in the default pool)
from tests.support import ROOT

RELEASED = json_format.Parse(
    (ROOT / "protos" / "released.json").read_text(), descriptor_pb2.FileDescriptorSet(), ignore_unknown_fields=True
)
EXCEPTIONS = [
    (rule, path)
    for rule, paths in yaml.safe_load((ROOT / "buf.yaml").read_text())["breaking"].get("ignore_only", {}).items()
    for path in paths
]


def options_set(options: descriptor_pb2.FileOptions) -> set[str]:
    return {field.name for field, _ in options.ListFields()}


@pytest.mark.parametrize(("rule", "path"), EXCEPTIONS)
def test_a_breaking_exception_covers_a_file_option_the_release_lacks(rule: str, path: str) -> None:
    assert rule.startswith("FILE_SAME_"), f"{rule}: only file options may be excepted"
    option = rule.removeprefix("FILE_SAME_").lower()
    name = path.removeprefix("protos/")
    released = next(file.options for file in RELEASED.file if file.name == name)
    current = descriptor_pool.Default().FindFileByName(name).GetOptions()

    assert (option in options_set(released), option in options_set(current)) == (False, True)
