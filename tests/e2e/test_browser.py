"""The HTML report in a real headless Chromium: text from campaign files and server logs stays text.

Hostile strings are planted in every user-controlled field of the sample results (experiment
ids, why/expect, reasons, log tails, flag diffs, warnings, checks, golden-prompt probes, the
engine's log evidence, campaign title and description, the campaign file, references,
environment strings, run-level metadata), the report is rendered with ``render_html`` and
opened from a file:// URL. Nothing planted may run, add elements or attributes, fetch anything
or restyle the page; all of it must be readable as text, and the embedded results (the JSON in
``<script type="application/json" id="reportgen-data">``) must give it back unchanged.

One browser per module; the clean and the hostile report are each loaded once.
"""

from __future__ import annotations

import itertools
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from reportgen import results
from reportgen.render import render_html
from reportgen.results.model import Run
from tests.conftest import ROOT

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed")

FIXTURE = ROOT / "tests" / "fixtures" / "sample-run"

SCRIPT = "<script>window.__pwned=1</script>"
IMG = '<img src=x onerror="window.__pwned=2">'
SVG_ATTR = '"><svg onload="window.__pwned=3">'
CLOSE_SCRIPT = "</script><script>window.__pwned=4</script>"
JS_URL = "javascript:window.__pwned=5"
STYLE = "<style>body{display:none}</style>"
TEMPLATE = "{{ 7*7 }}"
MATH = "$\\alpha$"  # matplotlib mathtext would draw an alpha
IFRAME = "<iframe srcdoc='<script>parent.__pwned=6</script>'></iframe>"
LINK = '<a href="javascript:window.__pwned=7">click</a>'
ENTITIES = "&lt;b&gt;not bold&lt;/b&gt; &amp; &#60;i&#62;"  # must not be decoded
COMMENT = "<!-- an unclosed comment"  # would hide the rest of the page
BASE = '<base href="https://evil.example/">'
REFRESH = '<meta http-equiv="refresh" content="0;url=javascript:window.__pwned=8">'
SINGLE_QUOTE = "' onmouseover='window.__pwned=9' x='"
UPPER_CLOSE = "</SCRIPT ><SCRIPT>window.__pwned=10</SCRIPT>"
CDATA = "]]><![CDATA[<script>window.__pwned=11</script>"  # against the SVG legend text
JINJA_BLOCK = "{% include 'report.css' %}{# hidden #}"
HTTPS_QUOTE = 'https://example.org/"><svg onload="window.__pwned=12">'  # becomes a link
SEPARATORS = "line\u2028separator\u2029paragraph"  # valid JSON, invalid in old JS strings

HOSTILE = (
    SCRIPT,
    IMG,
    SVG_ATTR,
    CLOSE_SCRIPT,
    JS_URL,
    STYLE,
    TEMPLATE,
    MATH,
    IFRAME,
    LINK,
    ENTITIES,
    COMMENT,
    BASE,
    REFRESH,
    SINGLE_QUOTE,
    UPPER_CLOSE,
    CDATA,
    JINJA_BLOCK,
)

# Experiment ids, in the fixture's order: four measured (charted) experiments and the failed one.
IDS = (MATH, TEMPLATE, CLOSE_SCRIPT, IMG, SCRIPT)

# Elements that text must never create; their number must match a clean report's.
ELEMENTS = (
    "script",
    "style",
    "svg",
    "img",
    "iframe",
    "frame",
    "object",
    "embed",
    "link",
    "meta",
    "base",
    "form",
    "input",
    "button",
    "template",
    "noscript",
    "video",
    "audio",
    "source",
    "math",
    "foreignObject",
    "section",
    "h1",
    "h2",
)


@pytest.fixture(scope="module")
def sample() -> Run:
    return results.load(FIXTURE)


def plant(sample: Run) -> Run:
    """The sample results with a hostile string in every user-controlled field. Planted in
    the results as saved (``dump``), read back as a results file is; the values the schema
    refuses (a check's status, a comparison's verdict: a damaged file never gets that far)
    are set on the read results, so the page must still keep them text."""
    data = sample.dump()
    refused: list[tuple[int, str, str]] = []  # (experiment, field, value), set after parsing
    payloads = itertools.cycle(HOSTILE)

    def nxt() -> str:
        return next(payloads)

    exps = data["experiments"]
    rename = {e["id"]: new for e, new in zip(exps, IDS, strict=True)}
    data["best"] = rename[data["best"]]
    for c in data["campaign"]["experiment"]:
        c["id"] = rename[c["id"]]
    for i, e in enumerate(exps):
        e["id"] = rename[e["id"]]
        if e.get("parent"):
            e["parent"] = rename[e["parent"]]
        e["why"] = f"why {nxt()}"
        e["expect"] = nxt()
        e["started_at"] = nxt()
        e["warnings"] = [nxt(), nxt()]
        e["flag_diff"] = [
            *e.get("flag_diff", []),
            {"key": nxt(), "kind": "changed", "before": nxt(), "after": nxt()},
            {"key": nxt(), "kind": "added", "before": None, "after": [nxt(), 1]},
        ]
        e["command"] = [*(e.get("command") or ["engine"]), "--flag", nxt()]
        e["env"] = {nxt(): nxt()}
        if e["status"] == "failed" or i == 3:  # a reason shows the log tail, not the explanation
            e["reason"] = f"{nxt()} server exited"
            e["log_file"] = nxt()
            e["log_tail"] = "\n".join([nxt(), nxt(), SEPARATORS, nxt()])
        elif e.get("decision"):
            e["decision"]["explanation"] = nxt()
        if e.get("decision") and e["decision"].get("vs_parent"):
            refused.append((i, "verdict", SVG_ATTR))  # goes into a class attribute
        e["checks"] = [
            {"id": "c1", "title": nxt(), "status": "warn", "evidence": nxt(), "hint": nxt()},
            {"id": f"c2-{i}", "title": nxt(), "status": "fail", "evidence": nxt(), "hint": nxt()},
            {"id": "c3", "title": nxt(), "status": "pass", "evidence": nxt(), "hint": ""},
        ]
        if i == 0:
            e["checks"].append(
                {"id": "c4", "title": nxt(), "status": "pass", "evidence": nxt(), "hint": ""}
            )
            refused.append((i, "status", SVG_ATTR))
        e["probes"] = [
            {"prompt": nxt(), "expect": nxt(), "answer": nxt(), "error": None},
            {"prompt": nxt(), "expect": "", "answer": None, "error": nxt()},
        ]
        e["log_evidence"] = {
            "found": {nxt(): nxt(), nxt(): ""},  # the second is "not in the log"
            "warnings": 1,
            "warning_lines": [nxt()],
            "errors": 1,
            "error_lines": [nxt()],
        }
        e["engine_info"] = {nxt(): nxt()}
        e["model_files"] = {"files": {nxt(): nxt()}, "error": nxt()}
        e["server_args_resolved"] = {nxt(): nxt()}
        e["gpu_counters"] = {"new_errors": [nxt()]}
        e["telemetry"] = {"error": f"nvml: {nxt()}"}
        if e.get("levels"):
            e["levels"][0]["engine_metrics"] = {"error": nxt()}

    camp = data["campaign"]
    camp["campaign"]["title"] = f"{SCRIPT} {TEMPLATE}"
    camp["campaign"]["name"] = COMMENT
    camp["campaign"]["description"] = f"{STYLE} {REFRESH} {BASE}"
    ref = camp["reference"][0]
    camp["reference"] += [
        {**ref, "name": SCRIPT, "source": JS_URL, "conditions": IMG},
        {**ref, "name": LINK, "source": HTTPS_QUOTE, "conditions": TEMPLATE},
        {**ref, "name": nxt(), "source": f" {JS_URL}", "conditions": nxt()},
    ]
    data["campaign_file"]["path"] = SINGLE_QUOTE
    data["campaign_file"]["text"] += "".join(f"\n# {s}" for s in HOSTILE) + "\n"

    data["run_id"] = CLOSE_SCRIPT
    data["reportgen_version"] = SVG_ATTR  # <meta name="generator" content="...">
    data["status"] = "incomplete"  # shows the banner with the reason
    data["status_reason"] = IMG
    data["finished_at"] = SVG_ATTR  # <meta name="dcterms.created" content="...">
    data["engine"]["name"] = SCRIPT

    env = data["environment"]
    env["host"].update(hostname=IMG, cpu_model=STYLE, os=nxt())
    env["host"][SVG_ATTR] = CLOSE_SCRIPT  # unknown host fields are shown with their names
    env["software"]["env"] = {LINK: IFRAME, nxt(): nxt()}
    env["software"]["packages"][ENTITIES] = TEMPLATE
    env["software"]["repos"] = [{"path": nxt(), "commit": nxt(), "dirty": True}]
    env["gpus"] = {
        "available": True,
        "driver": nxt(),
        "count": 1,
        "devices": [
            {
                "index": 0,
                "name": SCRIPT,
                "uuid": SVG_ATTR,
                "compute_capability": nxt(),
                "memory_total_bytes": nxt(),
                "power_limit_w": 700,
                nxt(): nxt(),
            }
        ],
        "topology": [{"gpus": [0, 1], "common_ancestor": IMG, "p2p": {"read": STYLE}}],
    }
    run = results.parse(data)
    for i, name, value in refused:  # model_copy(update=...) does not validate
        exp = run.experiments[i]
        if name == "verdict" and exp.decision:
            first = exp.decision.vs_parent[0]
            exp.decision.vs_parent[0] = first.model_copy(update={name: value})
        if name == "status":
            exp.checks[-1] = exp.checks[-1].model_copy(update={name: value})
    return run


@dataclass
class Loaded:
    """A report open in the browser, with what it did while loading."""

    page: Any  # playwright.sync_api.Page
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def js(self, expression: str, arg: Any = None) -> Any:
        return self.page.evaluate(expression, arg)

    def text(self) -> str:
        """The visible text of the page with every <details> opened."""
        self.js("document.querySelectorAll('details').forEach(d => { d.open = true; })")
        return self.page.inner_text("body")

    def count(self, selector: str) -> int:
        return self.js("s => document.querySelectorAll(s).length", selector)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        try:
            yield browser
        finally:
            browser.close()


def _load(browser: Any, html: str, path: Path) -> Loaded:
    path.write_text(html, encoding="utf-8")
    page = browser.new_page()
    loaded = Loaded(page)
    page.on("console", lambda m: loaded.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: loaded.errors.append(str(e)))
    page.on("request", lambda r: loaded.requests.append(r.url))

    def on_dialog(d: Any) -> None:
        loaded.dialogs.append(d.message)
        d.dismiss()

    page.on("dialog", on_dialog)
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    page.wait_for_timeout(100)  # room for any late handler (none should exist)
    return loaded


@pytest.fixture(scope="module")
def hostile_data(sample: Run) -> Run:
    return plant(sample)


@pytest.fixture(scope="module")
def clean(browser: Any, sample: Run, tmp_path_factory: pytest.TempPathFactory) -> Loaded:
    return _load(browser, render_html(sample), tmp_path_factory.mktemp("clean") / "report.html")


@pytest.fixture(scope="module")
def hostile(browser: Any, hostile_data: Run, tmp_path_factory: pytest.TempPathFactory) -> Loaded:
    path = tmp_path_factory.mktemp("hostile") / "report.html"
    return _load(browser, render_html(hostile_data), path)


# -- nothing runs ---------------------------------------------------------------------------


def test_planted_script_never_runs(hostile: Loaded) -> None:
    assert hostile.js("typeof window.__pwned") == "undefined"
    assert hostile.js("Object.keys(window).filter(k => k.startsWith('__pwned'))") == []
    assert hostile.dialogs == []
    # still the report, not a page a <meta http-equiv="refresh"> or <base> moved to
    assert hostile.page.url.endswith("/report.html")
    assert hostile.js("document.baseURI") == hostile.page.url


def test_no_event_handler_attributes(hostile: Loaded, clean: Loaded) -> None:
    assert hostile.count("img[onerror], svg[onload], [onload], [onerror], [onmouseover]") == 0
    find = """() => [...document.querySelectorAll('*')].flatMap(el =>
        [...el.attributes].filter(a => a.name.toLowerCase().startsWith('on'))
            .map(a => el.localName + '[' + a.name + ']'))"""
    assert hostile.js(find) == []
    assert clean.js(find) == []


def test_the_only_script_is_the_embedded_data(hostile: Loaded) -> None:
    scripts = hostile.js(
        "() => [...document.querySelectorAll('script')].map(s => [s.type, s.id, s.src])"
    )
    assert scripts == [["application/json", "reportgen-data", ""]]
    assert hostile.js("document.scripts.length") == 1
    # the data element is the last thing in the body: nothing planted closed it early
    assert hostile.js("document.body.lastElementChild.id") == "reportgen-data"


def test_no_javascript_urls(hostile: Loaded) -> None:
    urls = hostile.js(
        """() => [...document.querySelectorAll('*')].flatMap(el => [...el.attributes]
            .filter(a => ['href', 'src', 'xlink:href', 'action', 'formaction', 'srcdoc',
                          'data', 'content'].includes(a.name))
            .map(a => [el.localName, a.name, a.value]))"""
    )
    assert not [u for u in urls if "javascript:" in u[2].lower()]
    assert hostile.count('a[href^="javascript:" i]') == 0
    links = hostile.js("() => [...document.querySelectorAll('a[href]')].map(a => a.href)")
    external = [u for u in links if not u.startswith(hostile.page.url.split("#")[0] + "#")]
    # the https source becomes the one link, its quote kept inside the attribute value
    assert external == ["https://example.org/%22%3E%3Csvg%20onload=%22window.__pwned=12%22%3E"]
    refs = hostile.js(
        "() => [...document.querySelectorAll('table.references td:last-child')]"
        ".map(td => [td.textContent.trim(), td.querySelectorAll('a').length])"
    )
    # the last cell holds the conditions, then the source: plain text, or the one https link
    assert any(text.endswith(JS_URL) and n == 0 for text, n in refs)
    assert any(text.endswith(HTTPS_QUOTE) and n == 1 for text, n in refs)


def test_no_elements_are_added_and_the_page_is_not_restyled(hostile: Loaded, clean: Loaded) -> None:
    for tag in ELEMENTS:
        assert hostile.count(tag) == clean.count(tag), tag
    assert hostile.count("style") >= 1  # the report's own stylesheet (and the charts')
    assert hostile.count("svg") == 3  # the three charts, no planted <svg>
    assert hostile.count("meta[http-equiv], base, iframe, img, a[href^='javascript' i]") == 0
    comments = """() => { const w = document.createTreeWalker(document, NodeFilter.SHOW_COMMENT);
        let n = 0; while (w.nextNode()) n++; return n; }"""
    assert hostile.js(comments) == clean.js(comments)
    assert hostile.js("getComputedStyle(document.body).display") != "none"
    assert hostile.page.is_visible("h1")
    assert hostile.page.is_visible("section#reproduce")
    # the same style sheets, word for word: no planted rule reached any <style>
    styles = "() => [...document.querySelectorAll('style')].map(s => s.textContent)"
    assert hostile.js(styles) == clean.js(styles)


# -- everything reads as text ---------------------------------------------------------------


def test_hostile_strings_are_visible_text(hostile: Loaded) -> None:
    body = hostile.text()
    missing = [s for s in HOSTILE if s not in body]
    assert missing == []
    assert hostile.page.inner_text("h1") == f"{SCRIPT} {TEMPLATE}"
    assert hostile.js("document.title") == f"{SCRIPT} {TEMPLATE} ({CLOSE_SCRIPT})"
    timeline = hostile.js(
        "() => [...document.querySelectorAll('#decisions .event-head h3')].map(h => h.textContent)"
    )
    assert timeline == list(IDS)
    summary = hostile.js(
        "() => [...document.querySelectorAll('.summary-table td.id a')].map(a => a.textContent)"
    )
    assert summary == list(IDS)
    assert hostile.page.inner_text(".banner-incomplete").count(IMG) == 1
    assert ENTITIES in body and "<b>not bold</b>" not in body  # entities stay as typed
    log = hostile.js(
        "() => [...document.querySelectorAll('pre.log')].map(p => p.textContent).join('\\n')"
    )
    assert SEPARATORS in log


def test_template_syntax_is_not_evaluated(hostile: Loaded) -> None:
    body = hostile.text()
    assert TEMPLATE in body and JINJA_BLOCK in body
    # the best experiment, in the summary sentence ("delivers" only when every level is better)
    assert f"{TEMPLATE} delivers" in body or f"{TEMPLATE} is the best configuration" in body
    assert "49 delivers" not in body and "49 is the best" not in body
    texts = hostile.js(
        "() => [...document.querySelectorAll('h1, h3, h4, td.id a, .lead')].map(e => e.textContent)"
    )
    assert not [t for t in texts if "49" in t]
    # {% include 'report.css' %} would have pasted the stylesheet into the text
    assert ".badge" not in body


def test_chart_legends_are_literal(hostile: Loaded) -> None:
    svg_text = hostile.js(
        "() => [...document.querySelectorAll('svg text')].map(t => t.textContent).join('\\n')"
    )
    for exp_id in IDS[:4]:  # the measured experiments, drawn in every chart
        assert exp_id in svg_text, exp_id
    assert "α" not in svg_text  # not mathtext
    assert hostile.count("svg script, svg foreignObject, svg [onload]") == 0


# -- the embedded results -------------------------------------------------------------------


def test_embedded_results_round_trip(hostile: Loaded, hostile_data: Run) -> None:
    parsed = hostile.js("JSON.parse(document.getElementById('reportgen-data').textContent)")
    assert parsed["results"] == json.loads(json.dumps(hostile_data.dump()))
    exps = parsed["results"]["experiments"]
    assert [e["id"] for e in exps] == list(IDS)
    assert SEPARATORS in exps[-1]["log_tail"]
    assert parsed["results"]["campaign"]["reference"][-2]["source"] == HTTPS_QUOTE
    raw = hostile.js("document.getElementById('reportgen-data').textContent")
    assert "<" not in raw and ">" not in raw  # nothing that could close the element


# -- a quiet load ---------------------------------------------------------------------------


def test_no_errors_and_nothing_fetched(hostile: Loaded, clean: Loaded) -> None:
    for loaded in (clean, hostile):
        assert loaded.errors == []
        assert loaded.requests == [loaded.page.url]


def test_reads_on_a_phone_without_sideways_scrolling(hostile: Loaded) -> None:
    """At a phone's width (390 CSS px) the page itself never scrolls sideways, even with the
    hostile run's long ids and paths: wide tables scroll inside their own wrapper."""
    page = hostile.page
    page.set_viewport_size({"width": 390, "height": 844})
    try:
        widths = hostile.js(
            "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        )
        assert widths[0] <= widths[1], widths
        wide = hostile.js(
            "() => [...document.querySelectorAll('table')]"
            ".filter(t => t.getBoundingClientRect().width > 390)"
            ".filter(t => !t.closest('.table-wrap')).length"
        )
        assert wide == 0  # every table wider than the phone scrolls inside .table-wrap
    finally:
        page.set_viewport_size({"width": 1280, "height": 900})
