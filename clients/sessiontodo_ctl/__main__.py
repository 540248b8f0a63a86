"""``python -m sessiontodo_ctl`` / ``sessiontodoctl``."""

from sessiontodo_ctl.cli import main

if __name__ == "__main__":
    main()
