"""Claude Code's task lists in sessiontodo, both ways: ``sessiontodo-claude``.

``tasks`` is Claude's task file; ``folder`` reads and writes a list folder the way the CLI does,
under its locks; ``watcher`` follows it (inotify); ``mapping`` turns tasks and todos into one
shape, ``merge`` merges them field by field, ``state`` remembers the pairs; ``bridge`` drives it all.
"""

from sessiontodo_claude.bridge import ORIGIN, ClaudeBridge
from sessiontodo_claude.folder import TaskFolder
from sessiontodo_claude.tasks import Task

__all__ = ["ORIGIN", "ClaudeBridge", "Task", "TaskFolder"]
