"""The live web board of sessiontodo (``sessiontodo-web``).

One small ASGI app follows ONE ``WatchChanges`` feed of a sessiontodo service and serves a page
that shows every session as a tree, with its list and recent changes, live over Server-Sent
Events (event ids are feed cursors, so a reconnecting page resumes where it stopped), and lets
signed-in viewers edit lists with origin ``web`` and the revision they saw.
"""

from sessiontodo_web.app import create_app
from sessiontodo_web.auth import Viewers
from sessiontodo_web.board import Board
from sessiontodo_web.edits import ORIGIN, Conflict, Editor
from sessiontodo_web.settings import Settings
from sessiontodo_web.web import RunningWeb, start_web

__all__ = ["ORIGIN", "Board", "Conflict", "Editor", "RunningWeb", "Settings", "Viewers", "create_app", "start_web"]
