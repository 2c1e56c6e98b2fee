"""Secrets never leave the process: URLs lose their user:password before MLflow, a log or a report sees them."""

from __future__ import annotations

import re

_URL_CREDENTIALS = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@")


def redact_credentials(text: str) -> str:
    """``text`` with the user:password of every URL in it replaced by ``***`` (what may reach MLflow or a log).

    >>> redact_credentials("http://user:secret@judge.example/v1")
    'http://***@judge.example/v1'
    """
    return _URL_CREDENTIALS.sub(r"\g<scheme>***@", text)
