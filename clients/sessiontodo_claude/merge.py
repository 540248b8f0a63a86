"""Three-way merge of one task's fields (pure): what both sides agreed on last, and each side now.

A field one side changed since the last agreement takes that side's value; a field both changed
to different values takes the value of ``prefer``, the side whose change the bridge noticed last
(last writer per field). Without a last agreement (a pair seen for the first time), ``prefer``
decides every field that differs.
"""

from __future__ import annotations

from typing import Literal

from sessiontodo_claude.mapping import Item

Side = Literal["claude", "sessiontodo"]


def merge(base: Item | None, claude: Item, service: Item, prefer: Side) -> Item:
    """The fields both sides should show; a field missing from the result (a metadata key) is removed."""
    merged: Item = {}
    for field in claude.keys() | service.keys():
        mine, theirs = claude.get(field), service.get(field)
        if mine == theirs:
            value = mine
        elif base is not None and mine == base.get(field):
            value = theirs
        elif base is not None and theirs == base.get(field):
            value = mine
        else:
            value = mine if prefer == "claude" else theirs
        if value is not None:
            merged[field] = value
    return merged
