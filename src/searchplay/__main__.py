"""``python -m searchplay`` is the same as the ``searchplay`` console script; a process a launcher started (a
self-play stage on several processes) also records a failure's exit code for the process that launched it."""

from searchplay.cli import app
from searchplay.launch import record_exit_code

try:
    app()
except SystemExit as exit_:
    record_exit_code(exit_.code)
    raise
