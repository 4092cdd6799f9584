"""One TLS context for every ``httpx`` client reportgen opens.

A client built without one makes its own, loading the CA bundle each time: about 40 ms of CPU
on a small host, for every metrics scrape (two per level run), readiness poll and probe,
whether the URL is https or not. The context is made once per process, as httpx would make
it (honouring ``SSL_CERT_FILE`` and ``SSL_CERT_DIR``), and shared: an ``ssl.SSLContext`` may
serve many connections and threads at once.
"""

from __future__ import annotations

import functools
import ssl

import httpx

__all__ = ["context"]


@functools.cache
def context() -> ssl.SSLContext:
    """The process's TLS context for ``httpx`` (``verify=context()``)."""
    return httpx.create_ssl_context()
