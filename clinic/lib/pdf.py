"""The PDF toolkit every printed document shares: ReportLab's platypus on A4 in the Bitstream Vera fonts
that ship with ReportLab, embedded as TrueType, with one set of colours, paragraph styles and table helpers.

Latin text with the accents of Western European languages (é, ë, ñ, ç) prints as sent. A letter Vera lacks
prints as its base letter where it has one (Ś -> S, ā -> a), anything else (another script) as "?": never
as a blank (printable). Amounts are labelled INR, since Vera has no rupee sign. A document is built in
memory and either returned whole or refused with RenderError, never sent in part.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Callable, Sequence
from decimal import Decimal
from io import BytesIO
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import reportlab
from django.http import HttpResponse
from reportlab.lib import colors
from reportlab.lib.enums import TA_RIGHT
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle
from reportlab.lib.units import mm
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import TTFont
from reportlab.pdfgen.canvas import Canvas
from reportlab.platypus import Flowable, Paragraph, SimpleDocTemplate, Table, TableStyle

from clinic.lib.amount_words import indian_figures

FONT, BOLD, ITALIC = "Vera", "Vera-Bold", "Vera-Italic"
MARGIN = 14 * mm
FRAME_PADDING = 6  # platypus frames keep 6 pt inside each edge
WIDTH = A4[0] - 2 * (MARGIN + FRAME_PADDING)
INK = colors.HexColor("#1f2933")
RULE = colors.HexColor("#9aa5b1")
SHADE = colors.HexColor("#e4e7eb")
MARK = colors.HexColor("#c0392b")


class RenderError(RuntimeError):
    """The PDF of a document could not be built."""


@functools.cache
def register_fonts() -> frozenset[int]:
    """Register the Vera family once per process; the code points it has glyphs for."""
    fonts = Path(reportlab.__file__).parent / "fonts"
    faces = []
    for name, file in ((FONT, "Vera.ttf"), (BOLD, "VeraBd.ttf"), (ITALIC, "VeraIt.ttf"), ("Vera-BI", "VeraBI.ttf")):
        font = TTFont(name, str(fonts / file))
        pdfmetrics.registerFont(font)
        faces.append(frozenset(font.face.charToGlyph))
    pdfmetrics.registerFontFamily(FONT, normal=FONT, bold=BOLD, italic=ITALIC, boldItalic="Vera-BI")
    return frozenset.intersection(*faces)


def printable(value: str) -> str:
    """`value` with each character the fonts lack replaced: by its base letter (Ś -> S), else by "?"."""
    glyphs = register_fonts()
    if all(ord(char) in glyphs for char in value):
        return value
    out = []
    for char in value:
        if ord(char) in glyphs:
            out.append(char)
            continue
        base = "".join(c for c in unicodedata.normalize("NFKD", char) if not unicodedata.combining(c))
        out.append(base if base and all(ord(c) in glyphs for c in base) else "?")
    return "".join(out)


def _style(name: str, size: float = 8, *, font: str = FONT, align: int = 0, leading: float | None = None) -> Any:
    return ParagraphStyle(
        name, fontName=font, fontSize=size, leading=leading or size * 1.25, alignment=align, textColor=INK
    )


BODY = _style("body")
SMALL = _style("small", 7)
NUMBER = _style("number", 7.5, align=TA_RIGHT)
CELL = _style("cell", 7.5)
HEAD = _style("head", 7.5, font=BOLD)
HEAD_RIGHT = _style("head-right", 7.5, font=BOLD, align=TA_RIGHT)
NAME = _style("name", 13, font=BOLD)
TITLE = _style("title", 15, font=BOLD, align=TA_RIGHT)
SECTION = ParagraphStyle("section", parent=_style("section-base", 8.5, font=BOLD, leading=12), keepWithNext=1)
SIGNATURE = _style("signature", 8, align=TA_RIGHT)
BANNER = ParagraphStyle("banner", parent=_style("banner", 11, font=BOLD), textColor=MARK)


def text(value: str, style: Any = CELL) -> Paragraph:
    return Paragraph(escape(printable(value)), style)


def money(amount: Decimal, style: Any = NUMBER) -> Paragraph:
    return Paragraph(indian_figures(amount), style)


# Every document's tables: a shaded header row, a box, a rule under each row, compact padding.
GRID_STYLE: tuple[tuple[Any, ...], ...] = (
    ("BACKGROUND", (0, 0), (-1, 0), SHADE),
    ("BOX", (0, 0), (-1, -1), 0.6, RULE),
    ("LINEBELOW", (0, 0), (-1, -1), 0.3, RULE),
    ("VALIGN", (0, 0), (-1, -1), "TOP"),
    ("TOPPADDING", (0, 0), (-1, -1), 2.5),
    ("BOTTOMPADDING", (0, 0), (-1, -1), 2.5),
    ("LEFTPADDING", (0, 0), (-1, -1), 3),
    ("RIGHTPADDING", (0, 0), (-1, -1), 3),
)


def inline_response(data: bytes, filename: str) -> HttpResponse:
    """A PDF shown in the browser (inline) under `filename`, never cached (it carries patient data)."""
    response = HttpResponse(data, content_type=PDF)
    response["Content-Disposition"] = f'inline; filename="{filename}"'
    response["Cache-Control"] = "no-store"
    return response


def grid(rows: list[list[Any]], widths: Sequence[float], *, numbers_from: int, total_row: bool = False) -> Table:
    """A full-width table with a shaded header row that repeats on each page it continues on."""
    table = Table(rows, colWidths=list(widths), repeatRows=1)
    style = [*GRID_STYLE, ("ALIGN", (numbers_from, 0), (-1, -1), "RIGHT")]
    if total_row:
        style += [("BACKGROUND", (0, -1), (-1, -1), SHADE), ("LINEABOVE", (0, -1), (-1, -1), 0.6, RULE)]
    table.setStyle(TableStyle(style))
    return table


def scaled(widths: Sequence[float], flexible: int) -> list[float]:
    """The column widths with column `flexible` taking whatever the page width leaves."""
    fixed = sum(w for i, w in enumerate(widths) if i != flexible)
    return [WIDTH - fixed if i == flexible else w for i, w in enumerate(widths)]


def party(label: str, name: str, address: Sequence[str], details: Sequence[tuple[str, str]], style: Any) -> list:
    cells: list[Any] = [Paragraph(label, SMALL)] if label else []
    cells.append(text(name, style))
    cells += [text(line, BODY) for line in address]
    cells += [Paragraph(f"<b>{escape(key)}:</b> {escape(printable(value))}", BODY) for key, value in details]
    return cells


def watermark(mark: str | None) -> Any:
    """Drawn on every page before its content: the DRAFT or CANCELLED mark across the page."""

    def draw(canvas: Canvas, template: Any) -> None:
        if not mark:
            return
        canvas.saveState()
        canvas.setFillColor(MARK)
        canvas.setFillAlpha(0.12)
        canvas.setFont(BOLD, 80)
        canvas.translate(A4[0] / 2, A4[1] / 2)
        canvas.rotate(40)
        canvas.drawCentredString(0, 0, mark)
        canvas.restoreState()

    return draw


def footed_canvas(footer: str) -> type[Canvas]:
    """A canvas that holds its pages back until the end, to write "Page n of N" and `footer` on each."""

    class FootedCanvas(Canvas):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._pages: list[dict[str, Any]] = []

        def showPage(self) -> None:  # ReportLab's name
            self._pages.append(dict(self.__dict__))
            self._startPage()

        def save(self) -> None:
            for page in self._pages:
                self.__dict__.update(page)
                self.setFont(FONT, 7)
                self.setFillColor(INK)
                self.drawString(MARGIN, 8 * mm, footer)
                self.drawRightString(A4[0] - MARGIN, 8 * mm, f"Page {self._pageNumber} of {len(self._pages)}")
                super().showPage()
            super().save()

    return FootedCanvas


PDF = "application/pdf"


def a4_pdf(
    story: list[Flowable],
    *,
    title: str,
    author: str,
    subject: str,
    creator: str,
    on_page: Callable[..., Any] | None = None,
    canvasmaker: type[Canvas] = Canvas,
) -> bytes:
    """`story` laid out on A4 pages with the documents' margins (room for a footer below), as PDF bytes. The
    caller turns a layout failure into its own RenderError, naming its document."""
    register_fonts()
    buffer = BytesIO()
    template = SimpleDocTemplate(
        buffer,
        pagesize=A4,
        leftMargin=MARGIN,
        rightMargin=MARGIN,
        topMargin=MARGIN,
        bottomMargin=MARGIN + 4 * mm,
        title=title,
        author=author,
        subject=subject,
        creator=creator,
    )
    pages: dict[str, Any] = {"onFirstPage": on_page, "onLaterPages": on_page} if on_page else {}
    template.build(story, canvasmaker=canvasmaker, **pages)
    return buffer.getvalue()
