"""``python -m searchplay`` is the same as the ``searchplay`` console script."""

from searchplay.cli import app

app()
