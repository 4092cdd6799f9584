"""The results a report carries inside its HTML, the hashes of the raw tables beside it, and
the page's own digest.

``reportgen verify`` reads them back: the report is checked against the tables it names, and
the page against its digest (``stamp``, ``stamped``): a page edited after rendering no longer
matches it, whichever reportgen version rendered it.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from reportgen.errors import ResultsError
from reportgen.results.rundir import TABLE_FOLDERS, RunDir

DATA_ID = "reportgen-data"
EMBED_FORMAT = 1
# Embedded data larger than this is carried gzipped, as base64 inside a small JSON object
# ({"format": 1, "gzip": "..."}): a campaign's results are megabytes of JSON that compress
# about tenfold, and only ``reportgen verify`` reads them.
PACK_OVER = 256 * 1024
_DATA_RX = re.compile(
    r'<script type="application/json" id="' + DATA_ID + r'">(.*?)</script>', re.DOTALL
)


def table_hashes(run_dir: Path) -> dict[str, str]:
    """sha256 of every raw table in a run directory, by relative path."""
    out = {}
    for folder in TABLE_FOLDERS:
        for path in RunDir(run_dir).tables(folder):
            out[f"{folder}/{path.name}"] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def embed(results: Mapping[str, Any], tables: Mapping[str, str]) -> str:
    """The JSON a report carries: safe inside a <script> element (no "<", ">" or "&")."""
    # orjson: twenty times faster than json on a large campaign's results (several MB), with
    # the same key order and no spaces; NaN, which results never hold, would become null.
    raw = orjson.dumps(
        {"format": EMBED_FORMAT, "tables": dict(sorted(tables.items())), "results": results},
        option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY,
    )
    if len(raw) > PACK_OVER:  # base64 has none of the characters a script must not hold
        packed = base64.b64encode(gzip.compress(raw, 9, mtime=0)).decode("ascii")
        return json.dumps({"format": EMBED_FORMAT, "gzip": packed})
    body = raw.decode("utf-8")
    return body.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def extract(page: str, where: str = "this HTML") -> dict[str, Any]:
    """The embedded data of a report's HTML (ResultsError when it has none); ``where``: the
    file, for the message."""
    m = _DATA_RX.search(page)
    if not m:
        name = where.rsplit("/", 1)[-1]
        if name.endswith(".toml"):
            what = "a campaign file, not a report: give the report.html its run wrote"
        elif name == "results.json" or name.endswith(".json"):
            what = "results, not a report: give the run directory, or its report.html"
        else:
            what = (
                "not a report, or one rendered by an earlier reportgen; render it again with "
                "`reportgen render RUN_DIR`"
            )
        raise ResultsError(f"{where} carries no reportgen data: {what}")
    try:
        data = json.loads(m.group(1))
    except json.JSONDecodeError as exc:
        raise ResultsError(
            f"{where}: its embedded data is not valid JSON ({exc}): the page was edited; "
            "render it again with `reportgen render RUN_DIR`"
        ) from None
    if not isinstance(data, dict) or data.get("format") != EMBED_FORMAT:
        raise ResultsError(f"{where}: the report's embedded data is of an unknown format")
    if "gzip" in data:
        try:
            data = dict(json.loads(gzip.decompress(base64.b64decode(data["gzip"], validate=True))))
        except (ValueError, OSError, EOFError) as exc:
            raise ResultsError(
                f"{where}: its embedded data cannot be unpacked ({type(exc).__name__}): the "
                "page was edited; render it again with `reportgen render RUN_DIR`"
            ) from None
    return data


def without_data(page: str) -> str:
    """A report's HTML with its embedded data left out (the rest of the page as read)."""
    return _DATA_RX.sub("", page)


# The page's digest: the sha256 of its HTML with this element's content empty, written into it
DIGEST = '<meta name="reportgen-digest" content="{}">'
_DIGEST_RX = re.compile(r'<meta name="reportgen-digest" content="(sha256:[0-9a-f]{64})?">')
_DIGEST_LINE_RX = re.compile(_DIGEST_RX.pattern + r"\n?")


def stamp(page: str) -> str:
    """``page`` (which holds ``DIGEST`` with its content empty) with its digest written in."""
    empty = DIGEST.format("")
    if page.count(empty) != 1:
        return page  # (a page without the element: nothing to stamp)
    digest = hashlib.sha256(page.encode("utf-8")).hexdigest()
    return page.replace(empty, DIGEST.format(f"sha256:{digest}"), 1)


def stamped(page: str) -> bool | None:
    """Whether ``page`` is as it was rendered: its HTML, with the digest's content emptied,
    has the digest it carries. None where it carries none (rendered before reports did)."""
    found = list(_DIGEST_RX.finditer(page))
    if len(found) != 1 or found[0].group(1) is None:
        return None
    m = found[0]
    bare = page[: m.start()] + DIGEST.format("") + page[m.end() :]
    return hashlib.sha256(bare.encode("utf-8")).hexdigest() == m.group(1).removeprefix("sha256:")


def without_digest(page: str) -> str:
    """A report's HTML without its digest element and its line (as pages were rendered
    before reports carried one)."""
    return _DIGEST_LINE_RX.sub("", page, count=1)
