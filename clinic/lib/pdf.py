"""A TaxDocument (billing.documents) as an A4 PDF, laid out with ReportLab's platypus.

The page: the supplier and the document's facts side by side, the recipient, the lines with their GST,
the totals with the total in words, the HSN/SAC summary, then (on an invoice) its payments, credit notes
and refunds and what is left to settle. Long tables continue on the next page under their header row.
Text is set in the Bitstream Vera fonts that ship with ReportLab, embedded as TrueType: Latin text with
the accents of Western European languages (é, ë, ñ, ç) prints as sent. A letter Vera lacks prints as its
base letter where it has one (Ś -> S, ā -> a), anything else (another script) as "?": never as a blank.
Amounts are labelled INR, since Vera has no rupee sign.

The document is built in memory: render_pdf returns the whole file or raises RenderError, never a part.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Sequence
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
from reportlab.platypus import Flowable, KeepTogether, Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

from billing.amount_words import indian_figures
from billing.documents import Entry, Figure, Line, TaxDocument, format_date

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
def _register_fonts() -> frozenset[int]:
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
    glyphs = _register_fonts()
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


def _text(value: str, style: Any = CELL) -> Paragraph:
    return Paragraph(escape(printable(value)), style)


def _money(amount: Decimal, style: Any = NUMBER) -> Paragraph:
    return Paragraph(indian_figures(amount), style)


def _grid(rows: list[list[Any]], widths: Sequence[float], *, numbers_from: int, total_row: bool = False) -> Table:
    """A full-width table with a shaded header row that repeats on each page it continues on."""
    table = Table(rows, colWidths=list(widths), repeatRows=1)
    style: list[tuple[Any, ...]] = [
        ("BACKGROUND", (0, 0), (-1, 0), SHADE),
        ("BOX", (0, 0), (-1, -1), 0.6, RULE),
        ("LINEBELOW", (0, 0), (-1, -1), 0.3, RULE),
        ("VALIGN", (0, 0), (-1, -1), "TOP"),
        ("TOPPADDING", (0, 0), (-1, -1), 2.5),
        ("BOTTOMPADDING", (0, 0), (-1, -1), 2.5),
        ("LEFTPADDING", (0, 0), (-1, -1), 3),
        ("RIGHTPADDING", (0, 0), (-1, -1), 3),
        ("ALIGN", (numbers_from, 0), (-1, -1), "RIGHT"),
    ]
    if total_row:
        style += [("BACKGROUND", (0, -1), (-1, -1), SHADE), ("LINEABOVE", (0, -1), (-1, -1), 0.6, RULE)]
    table.setStyle(TableStyle(style))
    return table


def _scaled(widths: Sequence[float], flexible: int) -> list[float]:
    """The column widths with column `flexible` taking whatever the page width leaves."""
    fixed = sum(w for i, w in enumerate(widths) if i != flexible)
    return [WIDTH - fixed if i == flexible else w for i, w in enumerate(widths)]


def _party(label: str, name: str, address: Sequence[str], details: Sequence[tuple[str, str]], style: Any) -> list:
    cells: list[Any] = [Paragraph(label, SMALL)] if label else []
    cells.append(_text(name, style))
    cells += [_text(line, BODY) for line in address]
    cells += [Paragraph(f"<b>{escape(key)}:</b> {escape(printable(value))}", BODY) for key, value in details]
    return cells


def _header(doc: TaxDocument) -> Table:
    """The supplier with the document's title, ruled off."""
    supplier = doc.supplier
    left = _party("", supplier.name, supplier.address, supplier.details, NAME)
    table = Table([[left, _text(doc.title, TITLE)]], colWidths=[WIDTH - 95 * mm, 95 * mm])
    table.setStyle(
        TableStyle(
            [
                ("VALIGN", (0, 0), (-1, -1), "TOP"),
                ("LEFTPADDING", (0, 0), (-1, -1), 0),
                ("RIGHTPADDING", (0, 0), (-1, -1), 0),
                ("LINEBELOW", (0, 0), (-1, -1), 1, INK),
                ("BOTTOMPADDING", (0, 0), (-1, -1), 6),
            ]
        )
    )
    return table


def _parties(doc: TaxDocument) -> Table:
    """The recipient beside the document's facts (number, date, place of supply...), each in a box."""
    recipient = doc.recipient
    label = "Credit note issued to" if doc.kind == "credit_note" else "Billed to"
    facts = Table(
        [[_text(key, HEAD), _text(value, BODY)] for key, value in doc.facts],
        colWidths=[35 * mm, 53 * mm],
        style=TableStyle(
            [
                ("VALIGN", (0, 0), (-1, -1), "TOP"),
                ("LEFTPADDING", (0, 0), (-1, -1), 0),
                ("TOPPADDING", (0, 0), (-1, -1), 1),
                ("BOTTOMPADDING", (0, 0), (-1, -1), 1),
            ]
        ),
    )
    recipient_cell = _party(label, recipient.name, recipient.address, recipient.details, SECTION)
    table = Table([[recipient_cell, "", facts]], colWidths=[WIDTH - 95 * mm, 3 * mm, 92 * mm])
    table.setStyle(
        TableStyle(
            [
                ("VALIGN", (0, 0), (-1, -1), "TOP"),
                ("BOX", (0, 0), (0, 0), 0.6, RULE),
                ("BOX", (2, 0), (2, 0), 0.6, RULE),
                ("LEFTPADDING", (0, 0), (-1, -1), 5),
                ("TOPPADDING", (0, 0), (-1, -1), 4),
                ("BOTTOMPADDING", (0, 0), (-1, -1), 4),
            ]
        )
    )
    return table


def _tax_columns(doc: TaxDocument) -> list[str]:
    return ["IGST"] if doc.interstate else ["CGST", "SGST"]


def _tax_cells(doc: TaxDocument, cgst: Decimal, sgst: Decimal, igst: Decimal) -> list[Paragraph]:
    return [_money(igst)] if doc.interstate else [_money(cgst), _money(sgst)]


def _lines(doc: TaxDocument) -> Table:
    priced = doc.kind == "invoice"
    head = ["#", "Description", "HSN/SAC", "Qty"]
    head += ["Rate", "Disc."] if priced else []
    head += ["Taxable value", "GST rate", *_tax_columns(doc), "Amount"]
    widths = [7 * mm, 0, 17 * mm, 10 * mm]
    widths += [16 * mm, 13 * mm] if priced else []
    widths += [18 * mm, 13 * mm, *[15 * mm] * len(_tax_columns(doc)), 19 * mm]
    rows: list[list[Any]] = [[Paragraph(h, HEAD if i < 3 else HEAD_RIGHT) for i, h in enumerate(head)]]
    for number, line in enumerate(doc.lines, start=1):
        rows.append(_line_row(doc, number, line, priced))
    return _grid(rows, _scaled(widths, 1), numbers_from=3)


def _line_row(doc: TaxDocument, number: int, line: Line, priced: bool) -> list[Any]:
    row: list[Any] = [
        _text(str(number)),
        _text(line.description),
        _text(line.hsn_sac or "-"),
        _text(line.quantity or "-", NUMBER),
    ]
    if priced:
        row += [_money(line.rate or Decimal(0)), _money(line.discount or Decimal(0))]
    row += [_money(line.taxable), _text(line.tax_rate, NUMBER), *_tax_cells(doc, line.cgst, line.sgst, line.igst)]
    row.append(_money(line.amount))
    return row


def _figures(figures: Sequence[Figure], strong: Figure | None, width: float, title: str = "") -> Table:
    rows = [[Paragraph(title, SECTION), ""]] if title else []
    rows += [[_text(f.label, BODY), _money(f.amount, NUMBER)] for f in figures]
    if strong is not None:
        rows.append([_text(f"{strong.label} (INR)", HEAD), _money(strong.amount, HEAD_RIGHT)])
    table = Table(rows, colWidths=[width - 30 * mm, 30 * mm])
    style: list[tuple[Any, ...]] = [("TOPPADDING", (0, 0), (-1, -1), 1.5), ("BOTTOMPADDING", (0, 0), (-1, -1), 1.5)]
    if strong is not None:
        style += [("LINEABOVE", (0, -1), (-1, -1), 0.8, INK), ("LINEBELOW", (0, -1), (-1, -1), 0.8, INK)]
    table.setStyle(TableStyle(style))
    return table


def _totals(doc: TaxDocument) -> Table:
    words = [Paragraph(f"{escape(doc.total.label)} in words", HEAD), _text(doc.total_in_words, BODY)]
    table = Table([[words, _figures(doc.totals, doc.total, 72 * mm)]], colWidths=[WIDTH - 72 * mm, 72 * mm])
    table.setStyle(
        TableStyle(
            [
                ("VALIGN", (0, 0), (-1, -1), "TOP"),
                ("LEFTPADDING", (0, 0), (-1, -1), 0),
                ("RIGHTPADDING", (0, 0), (-1, -1), 0),
                ("RIGHTPADDING", (0, 0), (0, 0), 6 * mm),
            ]
        )
    )
    return table


def _hsn_summary(doc: TaxDocument) -> list[Flowable]:
    taxes = _tax_columns(doc)
    rows: list[list[Any]] = [
        [
            Paragraph(h, HEAD if i < 1 else HEAD_RIGHT)
            for i, h in enumerate(["HSN/SAC", "GST rate", "Taxable value", *taxes, "Total tax"])
        ]
    ]
    sums = [Decimal(0)] * 5
    for row in doc.hsn_summary:
        figures = (row.taxable, row.cgst, row.sgst, row.igst, row.total_tax)
        sums = [total + value for total, value in zip(sums, figures, strict=True)]
        rows.append(
            [
                _text(row.hsn_sac),
                _text(row.tax_rate, NUMBER),
                _money(row.taxable),
                *_tax_cells(doc, row.cgst, row.sgst, row.igst),
                _money(row.total_tax),
            ]
        )
    rows.append(
        [_text("Total", HEAD), _text(""), _money(sums[0], HEAD_RIGHT)]
        + [_money(value, HEAD_RIGHT) for value in ([sums[3]] if doc.interstate else sums[1:3])]
        + [_money(sums[4], HEAD_RIGHT)]
    )
    widths = _scaled([0, 22 * mm, 30 * mm, *[28 * mm] * len(taxes), 28 * mm], 0)
    return [Paragraph("HSN/SAC summary", SECTION), _grid(rows, widths, numbers_from=1, total_row=True)]


def _entries(title: str, entries: Sequence[Entry], what: str) -> list[Flowable]:
    if not entries:
        return []
    rows: list[list[Any]] = [[Paragraph("Date", HEAD), Paragraph(what, HEAD), Paragraph("Amount (INR)", HEAD_RIGHT)]]
    rows += [[_text(format_date(e.day)), _text(e.description), _money(e.amount)] for e in entries]
    return [
        Spacer(1, 4 * mm),
        Paragraph(title, SECTION),
        _grid(rows, _scaled([24 * mm, 0, 32 * mm], 1), numbers_from=2),
    ]


def _story(doc: TaxDocument) -> list[Flowable]:
    story: list[Flowable] = [_header(doc), Spacer(1, 3 * mm)]
    if doc.mark == "CANCELLED":
        story.append(Paragraph("CANCELLED", BANNER))
    story += [_text(note, BODY) for note in doc.notes]
    story += [Spacer(1, 2 * mm), _parties(doc), Spacer(1, 4 * mm)]
    story += [Paragraph("All amounts in INR (Rs.)", SMALL), Spacer(1, 1 * mm), _lines(doc), Spacer(1, 3 * mm)]
    story += [KeepTogether(_totals(doc)), Spacer(1, 4 * mm), *_hsn_summary(doc)]
    story += _entries("Payments received", doc.payments, "Mode and reference")
    story += _entries("Credit notes", doc.credit_notes, "Credit note and reason")
    story += _entries("Refunds", doc.refunds, "Mode and reference")
    return [*story, Spacer(1, 5 * mm), _closing(doc)]


def _closing(doc: TaxDocument) -> Table:
    """What is left to settle (on an issued invoice) beside the signature: one row, never split."""
    signature = [
        _text(f"For {doc.supplier.name}", SIGNATURE),
        Spacer(1, 12 * mm),
        _text("Authorised signatory", SIGNATURE),
    ]
    settlement: Any = ""
    if doc.settlement:
        settlement = _figures(doc.settlement[:-1], doc.settlement[-1], 80 * mm, "Settlement")
        settlement.hAlign = "LEFT"
    table = Table([[settlement, signature]], colWidths=[WIDTH - 75 * mm, 75 * mm])
    table.setStyle(
        TableStyle(
            [
                ("VALIGN", (0, 0), (0, 0), "TOP"),
                ("VALIGN", (1, 0), (1, 0), "BOTTOM"),
                ("LEFTPADDING", (0, 0), (-1, -1), 0),
                ("RIGHTPADDING", (0, 0), (-1, -1), 0),
            ]
        )
    )
    return table


def _watermark(mark: str | None) -> Any:
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


def _footed_canvas(footer: str) -> type[Canvas]:
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


def render_pdf(doc: TaxDocument) -> bytes:
    """The whole PDF file, or RenderError (with the cause chained) when ReportLab cannot build it."""
    _register_fonts()
    buffer = BytesIO()
    template = SimpleDocTemplate(
        buffer,
        pagesize=A4,
        leftMargin=MARGIN,
        rightMargin=MARGIN,
        topMargin=MARGIN,
        bottomMargin=MARGIN + 4 * mm,
        title=f"{doc.title} {doc.number or ''}".strip(),
        author=doc.supplier.name,
        subject=doc.title,
        creator="Clinic billing",
    )
    watermark = _watermark(doc.mark)
    footer = f"{doc.title} {doc.number or ''}".strip() + " - computer-generated document"
    try:
        template.build(_story(doc), onFirstPage=watermark, onLaterPages=watermark, canvasmaker=_footed_canvas(footer))
    except Exception as exc:  # any failure of the third-party layout is a RenderError
        raise RenderError(f"Could not render the PDF of {doc.title.lower()} {doc.number or doc.filename}.") from exc
    return buffer.getvalue()


PDF = "application/pdf"


def pdf_response(document: TaxDocument) -> HttpResponse:
    """The document's PDF, shown in the browser (inline) under its number as the file name."""
    response = HttpResponse(render_pdf(document), content_type=PDF)
    response["Content-Disposition"] = f'inline; filename="{document.filename}"'
    response["Cache-Control"] = "no-store"
    return response
