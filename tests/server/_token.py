"""The known token every test server is started with, and requests that carry it."""

from __future__ import annotations

import urllib.request

#: the token of every test server (the servers' own default, a new one, is tested apart)
TEST_TOKEN = "test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TEST_TOKEN}"}


def authorized(url: str, data: bytes | None = None, **headers: str) -> urllib.request.Request:
    """A request to a test server, with its token."""
    return urllib.request.Request(url, data=data, headers={**AUTH, **headers})
