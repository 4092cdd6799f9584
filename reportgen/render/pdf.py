"""The PDF: the same HTML, printed by WeasyPrint with the stylesheet's @page rules.

One document, two media: the HTML's print styles (A4, margins, page numbers in the footer,
no horizontal scrolling) are what WeasyPrint lays out, so the PDF needs no template of its own
and can never say something the HTML does not.

WeasyPrint reports CSS it ignores and resources it cannot load as log warnings. They are
collected and returned rather than printed: a report with a style the printer dropped is still
a report, but the tests assert there are none, so a stylesheet change that the PDF would
silently ignore is caught.
"""

from __future__ import annotations

import hashlib
import io
import logging
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Warnings that are expected and harmless, so they are not reported:
# - the chart SVG's style attributes (fill, stroke...) are also seen by WeasyPrint's HTML CSS
#   pass, which does not know SVG properties; its SVG renderer applies them all the same;
# - media queries with features (the phone and desktop layouts): print needs none of those
#   rules.
SVG_PROPERTIES = (
    "fill",
    "fill-opacity",
    "fill-rule",
    "stroke",
    "stroke-width",
    "stroke-linecap",
    "stroke-linejoin",
    "stroke-dasharray",
    "stroke-dashoffset",
    "stroke-opacity",
    "stroke-miterlimit",
    "text-anchor",
    "dominant-baseline",
    "clip-path",
)
BENIGN = re.compile(
    r"^Ignored `(?:" + "|".join(map(re.escape, SVG_PROPERTIES)) + r"):.*unknown property\.$"
    r"|^Expected a media type, got '[^']*\((?:max|min)-width"
    r"|^Invalid media type '[^']*\((?:max|min)-width[^']*' the whole @media rule was ignored"
)


@dataclass(frozen=True)
class Pdf:
    data: bytes
    warnings: list[str] = field(default_factory=list)


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if not BENIGN.search(message):
            self.messages.append(message)


@contextmanager
def _captured(names: tuple[str, ...]) -> Iterator[_Collect]:
    """Route the named loggers' warnings to a list for the duration, then restore them."""
    handler = _Collect()
    loggers = [logging.getLogger(n) for n in names]
    saved = [(lg.propagate, lg.level) for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.propagate = False
        if lg.level == logging.NOTSET or lg.level > logging.WARNING:
            lg.setLevel(logging.WARNING)
    try:
        yield handler
    finally:
        for lg, (propagate, level) in zip(loggers, saved, strict=True):
            lg.removeHandler(handler)
            lg.propagate = propagate
            lg.setLevel(level)


ChartPdfs = Mapping[str, bytes] | Callable[[], Mapping[str, bytes]]
PT_PER_PX = 0.75  # CSS pixels (WeasyPrint's layout unit) to PDF points


def html_to_pdf(html: str, base_dir: Path, charts: ChartPdfs | None = None) -> Pdf:
    """Print ``html`` to PDF bytes.

    ``base_dir`` resolves relative URLs (the report has none today, but a future image beside
    results.json should resolve inside the run directory, not the current directory). The
    PDF identifier is derived from the HTML, so the same report gets the same identifier
    instead of a random one, and the creation date comes from the document's
    ``dcterms.created`` meta (the run's finish time), never from the clock.

    Charts: an empty ``<svg data-chart="NAME" viewBox=...>`` box on the page is where chart
    NAME goes; ``charts`` maps names to one-page PDFs of the charts (or is a function that
    waits for them, called only once the page is laid out), each laid over its box after
    WeasyPrint has printed the page. WeasyPrint draws SVG in Python, element by element
    (about half a second per chart); a chart that matplotlib wrote as PDF costs nothing
    here and stays vector graphics with real text.
    """
    # Imported here: WeasyPrint loads Pango and fonts (about a second); HTML-only rendering
    # and the rest of the CLI should not pay for that.
    import weasyprint

    identifier = hashlib.sha256(html.encode("utf-8")).hexdigest()[:32].encode("ascii")
    with _captured(("weasyprint", "weasyprint.progress", "fontTools")) as log:
        document = weasyprint.HTML(string=html, base_url=str(base_dir)).render()
        data = document.write_pdf(pdf_identifier=identifier)
    if data is None:  # only when a target is given; kept for the type checker
        raise RuntimeError("WeasyPrint returned no PDF")
    slots = _slots(document)
    if slots:
        pdfs = charts() if callable(charts) else (charts or {})
        data = _overlay(data, slots, pdfs)
    return Pdf(data=data, warnings=log.messages)


@dataclass(frozen=True)
class _Slot:
    page: int  # 0-based
    name: str
    box: tuple[float, float, float, float]  # left, bottom, right, top in PDF points


def _slots(document: Any) -> list[_Slot]:
    """Where the chart boxes landed: page and rectangle (PDF points, origin bottom left)."""
    out = []
    for number, page in enumerate(document.pages):
        stack = [page._page_box]  # WeasyPrint's layout tree: no public API walks it
        while stack:
            b = stack.pop()
            stack.extend(getattr(b, "children", None) or [])
            element = getattr(b, "element", None)
            tag = str(getattr(b, "element_tag", None) or "")
            if not tag.endswith("svg") or element is None:
                continue
            name = element.get("data-chart")
            if name:
                x, y = b.content_box_x(), b.content_box_y()
                top = page.height - y
                out.append(
                    _Slot(
                        number,
                        name,
                        (
                            x * PT_PER_PX,
                            (top - b.height) * PT_PER_PX,
                            (x + b.width) * PT_PER_PX,
                            top * PT_PER_PX,
                        ),
                    )
                )
    return sorted(out, key=lambda s: (s.page, s.name))


def _overlay(data: bytes, slots: list[_Slot], charts: Mapping[str, bytes]) -> bytes:
    """Lay each chart's PDF page over its box (as a form XObject: vector, text kept)."""
    import pikepdf

    missing = sorted({s.name for s in slots} - set(charts))
    if missing:
        raise RuntimeError(f"no drawn chart for the printed page's box(es): {', '.join(missing)}")
    with pikepdf.open(io.BytesIO(data)) as doc:
        opened = []
        try:
            for n, slot in enumerate(slots):
                chart = pikepdf.open(io.BytesIO(charts[slot.name]))
                opened.append(chart)
                page = doc.pages[slot.page]
                form = chart.pages[0].as_form_xobject()
                # a name of our own (pikepdf's default is random): the same bytes every time
                name = page.add_resource(form, pikepdf.Name.XObject, pikepdf.Name(f"/RgChart{n}"))
                place = page.calc_form_xobject_placement(form, name, pikepdf.Rectangle(*slot.box))
                page.contents_add(b"q\n", prepend=True)  # the page's graphics state, restored
                page.contents_add(b"Q\n" + place)
                page.contents_coalesce()
            out = io.BytesIO()
            # deterministic_id: the same report gives the same bytes (no random /ID)
            doc.save(out, deterministic_id=True, compress_streams=True)
        finally:
            for chart in opened:
                chart.close()
    return out.getvalue()


def overflowing(html: str, base_dir: Path) -> list[str]:
    """Elements that run past the right edge of their page's content area when printed
    (a table cut off at the page edge, say): "page N: <tag class> by X px", or nothing."""
    import weasyprint

    with _captured(("weasyprint", "weasyprint.progress", "fontTools")):
        document = weasyprint.HTML(string=html, base_url=str(base_dir)).render()
    found: dict[tuple[int, str], float] = {}
    for number, page in enumerate(document.pages, 1):
        box = page._page_box  # WeasyPrint's layout tree: no public API walks it
        right = box.content_box_x() + box.width
        stack = [box]
        while stack:
            b = stack.pop()
            stack.extend(getattr(b, "children", None) or [])
            tag = getattr(b, "element_tag", None)
            if tag is None or not hasattr(b, "margin_width"):
                continue
            over = b.position_x + b.margin_width() - right
            if over > 0.5:
                cls = (b.element.get("class") or "") if b.element is not None else ""
                key = (number, f"<{tag}{' class=' + cls if cls else ''}>")
                found[key] = max(found.get(key, 0.0), over)
    return [f"page {n}: {what} by {px:.0f} px" for (n, what), px in sorted(found.items())]
