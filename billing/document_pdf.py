"""A TaxDocument (billing.documents) as an A4 PDF, laid out with the shared toolkit (clinic.lib.pdf).

The page: the supplier and the document's facts side by side, the recipient, the lines with their GST,
the totals with the total in words, the HSN/SAC summary, then (on an invoice) its payments, credit notes
and refunds and what is left to settle. Long tables continue on the next page under their header row.

The document is built in memory: render_pdf returns the whole file or raises RenderError, never a part.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any
from xml.sax.saxutils import escape

from django.http import HttpResponse
from reportlab.lib.units import mm
from reportlab.platypus import Flowable, KeepTogether, Paragraph, Spacer, Table, TableStyle

from billing.documents import Entry, Figure, Line, TaxDocument, format_date
from clinic.lib.pdf import (
    BANNER,
    BODY,
    HEAD,
    HEAD_RIGHT,
    INK,
    NAME,
    NUMBER,
    RULE,
    SECTION,
    SIGNATURE,
    SMALL,
    TITLE,
    WIDTH,
    RenderError,
    a4_pdf,
    footed_canvas,
    grid,
    inline_response,
    money,
    party,
    scaled,
    text,
    watermark,
)


def _header(doc: TaxDocument) -> Table:
    """The supplier with the document's title, ruled off."""
    supplier = doc.supplier
    left = party("", supplier.name, supplier.address, supplier.details, NAME)
    table = Table([[left, text(doc.title, TITLE)]], colWidths=[WIDTH - 95 * mm, 95 * mm])
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
        [[text(key, HEAD), text(value, BODY)] for key, value in doc.facts],
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
    recipient_cell = party(label, recipient.name, recipient.address, recipient.details, SECTION)
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
    return [money(igst)] if doc.interstate else [money(cgst), money(sgst)]


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
    return grid(rows, scaled(widths, 1), numbers_from=3)


def _line_row(doc: TaxDocument, number: int, line: Line, priced: bool) -> list[Any]:
    row: list[Any] = [
        text(str(number)),
        text(line.description),
        text(line.hsn_sac or "-"),
        text(line.quantity or "-", NUMBER),
    ]
    if priced:
        row += [money(line.rate or Decimal(0)), money(line.discount or Decimal(0))]
    row += [money(line.taxable), text(line.tax_rate, NUMBER), *_tax_cells(doc, line.cgst, line.sgst, line.igst)]
    row.append(money(line.amount))
    return row


def _figures(figures: Sequence[Figure], strong: Figure | None, width: float, title: str = "") -> Table:
    rows = [[Paragraph(title, SECTION), ""]] if title else []
    rows += [[text(f.label, BODY), money(f.amount, NUMBER)] for f in figures]
    if strong is not None:
        rows.append([text(f"{strong.label} (INR)", HEAD), money(strong.amount, HEAD_RIGHT)])
    table = Table(rows, colWidths=[width - 30 * mm, 30 * mm])
    style: list[tuple[Any, ...]] = [("TOPPADDING", (0, 0), (-1, -1), 1.5), ("BOTTOMPADDING", (0, 0), (-1, -1), 1.5)]
    if strong is not None:
        style += [("LINEABOVE", (0, -1), (-1, -1), 0.8, INK), ("LINEBELOW", (0, -1), (-1, -1), 0.8, INK)]
    table.setStyle(TableStyle(style))
    return table


def _totals(doc: TaxDocument) -> Table:
    words = [Paragraph(f"{escape(doc.total.label)} in words", HEAD), text(doc.total_in_words, BODY)]
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
                text(row.hsn_sac),
                text(row.tax_rate, NUMBER),
                money(row.taxable),
                *_tax_cells(doc, row.cgst, row.sgst, row.igst),
                money(row.total_tax),
            ]
        )
    rows.append(
        [text("Total", HEAD), text(""), money(sums[0], HEAD_RIGHT)]
        + [money(value, HEAD_RIGHT) for value in ([sums[3]] if doc.interstate else sums[1:3])]
        + [money(sums[4], HEAD_RIGHT)]
    )
    widths = scaled([0, 22 * mm, 30 * mm, *[28 * mm] * len(taxes), 28 * mm], 0)
    return [Paragraph("HSN/SAC summary", SECTION), grid(rows, widths, numbers_from=1, total_row=True)]


def _entries(title: str, entries: Sequence[Entry], what: str) -> list[Flowable]:
    if not entries:
        return []
    rows: list[list[Any]] = [[Paragraph("Date", HEAD), Paragraph(what, HEAD), Paragraph("Amount (INR)", HEAD_RIGHT)]]
    rows += [[text(format_date(e.day)), text(e.description), money(e.amount)] for e in entries]
    return [
        Spacer(1, 4 * mm),
        Paragraph(title, SECTION),
        grid(rows, scaled([24 * mm, 0, 32 * mm], 1), numbers_from=2),
    ]


def _story(doc: TaxDocument) -> list[Flowable]:
    story: list[Flowable] = [_header(doc), Spacer(1, 3 * mm)]
    if doc.mark == "CANCELLED":
        story.append(Paragraph("CANCELLED", BANNER))
    story += [text(note, BODY) for note in doc.notes]
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
        text(f"For {doc.supplier.name}", SIGNATURE),
        Spacer(1, 12 * mm),
        text("Authorised signatory", SIGNATURE),
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


def render_pdf(doc: TaxDocument) -> bytes:
    """The whole PDF file, or RenderError (with the cause chained) when ReportLab cannot build it."""
    footer = f"{doc.title} {doc.number or ''}".strip() + " - computer-generated document"
    try:
        return a4_pdf(
            _story(doc),
            title=f"{doc.title} {doc.number or ''}".strip(),
            author=doc.supplier.name,
            subject=doc.title,
            creator="Clinic billing",
            on_page=watermark(doc.mark),
            canvasmaker=footed_canvas(footer),
        )
    except Exception as exc:  # any failure of the third-party layout is a RenderError
        raise RenderError(f"Could not render the PDF of {doc.title.lower()} {doc.number or doc.filename}.") from exc


def pdf_response(document: TaxDocument) -> HttpResponse:
    """The document's PDF, shown in the browser (inline) under its number as the file name."""
    return inline_response(render_pdf(document), document.filename)
