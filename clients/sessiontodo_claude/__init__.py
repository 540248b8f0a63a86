"""Claude Code's task lists in sessiontodo.

``tasks`` is Claude Code's task file; ``folder`` reads and writes a list folder the way the CLI
does, under its locks.
"""

from sessiontodo_claude.folder import TaskFolder
from sessiontodo_claude.tasks import Task

__all__ = ["Task", "TaskFolder"]
