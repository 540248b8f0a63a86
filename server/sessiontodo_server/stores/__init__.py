"""Storage engines behind one narrow interface (``base.TodoStore``), chosen by URL."""
