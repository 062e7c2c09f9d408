"""The printable laboratory report of a lab order: an A4 PDF laid out with ReportLab's platypus, in the fonts,
colours and text helpers of the printed invoices (clinic.lib.pdf).

The page: the branch (name, address, phone) beside "LABORATORY REPORT" and the order number; the patient
(name, patient id, sex, age), the doctor, when the specimen was collected and the priority; then each item
(test, accession number, specimen or modality, status) with a table of its current results (analyte, value
with unit, flag with critical ones marked, reference range, status, and the reason of an amended version)
or, for imaging, its report as text. A footer warns when any result shown is preliminary.

The document is built in memory: render_lab_report returns the whole file or raises RenderError, never a part.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any
from xml.sax.saxutils import escape

from django.http import HttpResponse
from django.utils import timezone
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle
from reportlab.lib.units import mm
from reportlab.platypus import Flowable, KeepTogether, Paragraph, Spacer, Table, TableStyle

from clinic.lib.pdf import (
    BODY,
    BOLD,
    CELL,
    FONT,
    GRID_STYLE,
    HEAD,
    MARGIN,
    MARK,
    NAME,
    RULE,
    SECTION,
    SMALL,
    TITLE,
    WIDTH,
    RenderError,
    a4_pdf,
    inline_response,
    printable,
)
from lab.models import LabOrder, LabOrderItem, LabResult, ResultStatus, TestKind
from lab.representations import plain_quantity

DASH = "\u2013"  # en dash, as in "12 - 15.5"
CRITICAL = {"LL", "HH"}
_CRITICAL = ParagraphStyle("critical", parent=CELL, fontName=BOLD, textColor=MARK)
PRELIMINARY_NOTE = "Preliminary results are subject to change."


def _text(value: str, style: Any = CELL) -> Paragraph:
    return Paragraph(escape(printable(value)), style)


def _labelled(label: str, value: str) -> Paragraph:
    return Paragraph(f"<b>{escape(label)}:</b> {escape(printable(value))}", BODY)


def _number(value: Decimal | None) -> str:
    return "" if value is None else str(plain_quantity(value))


def _when(value: datetime | None, order: LabOrder) -> str:
    return value.astimezone(order.branch.zone).strftime("%d %b %Y %H:%M") if value else "Not yet collected"


def _current(item: LabOrderItem) -> list[LabResult]:
    """The current version of each analyte's result (or of the imaging report), in the selector's order."""
    by_analyte: dict[object, list[LabResult]] = {}
    for result in item.results.all():
        by_analyte.setdefault(result.analyte_id, []).append(result)
    return [next((r for r in versions if r.current), versions[-1]) for versions in by_analyte.values()]


def _header(order: LabOrder) -> Table:
    branch = order.branch
    address = ", ".join(part for part in (branch.address_line1, branch.city, branch.pincode) if part)
    left: list[Any] = [_text(branch.name, NAME)]
    if address:
        left.append(_text(address, BODY))
    if branch.phone:
        left.append(_labelled("Phone", branch.phone))
    right = [Paragraph("LABORATORY REPORT", TITLE), _text(f"Order {order.order_number}", TITLE.clone("number"))]
    table = Table([[left, right]], colWidths=[WIDTH * 0.55, WIDTH * 0.45])
    table.setStyle(
        TableStyle(
            [
                ("VALIGN", (0, 0), (-1, -1), "TOP"),
                ("LINEBELOW", (0, 0), (-1, -1), 0.8, RULE),
                ("BOTTOMPADDING", (0, 0), (-1, -1), 6),
                ("LEFTPADDING", (0, 0), (-1, -1), 0),
                ("RIGHTPADDING", (0, 0), (-1, -1), 0),
            ]
        )
    )
    return table


def _patient(order: LabOrder) -> Table:
    patient = order.patient
    day = (order.collected_at or timezone.now()).astimezone(order.branch.zone).date()
    left = [
        _labelled("Patient", patient.name),
        _labelled("Patient ID", patient.patient_id),
        _labelled("Sex", patient.gender.capitalize()),
        _labelled("Age", f"{patient.age_on(day)} years"),
    ]
    right = [
        _labelled("Doctor", order.doctor.name),
        _labelled("Collected at", _when(order.collected_at, order)),
        _labelled("Priority", order.priority.upper()),
        _labelled("Order status", order.status.capitalize()),
    ]
    table = Table([[left, right]], colWidths=[WIDTH / 2, WIDTH / 2])
    table.setStyle(
        TableStyle(
            [
                ("VALIGN", (0, 0), (-1, -1), "TOP"),
                ("LEFTPADDING", (0, 0), (-1, -1), 0),
                ("TOPPADDING", (0, 0), (-1, -1), 6),
                ("BOTTOMPADDING", (0, 0), (-1, -1), 6),
            ]
        )
    )
    return table


def _flag(result: LabResult) -> Paragraph:
    flag = result.flag or ""
    if flag in CRITICAL:
        return Paragraph(f"{flag} (critical)", _CRITICAL)
    if flag in {"L", "H"}:
        return Paragraph(f"<b>{flag}</b>", CELL)
    return _text(flag)


def _value(result: LabResult) -> str:
    value = _number(result.value_quantity) if result.value_quantity is not None else result.value_text
    return f"{value} {result.unit}".strip() if result.unit else value


def _range(result: LabResult) -> str:
    low, high = _number(result.reference_low), _number(result.reference_high)
    if not low and not high:
        return ""
    if not high:
        return f">= {low}"
    if not low:
        return f"<= {high}"
    return f"{low} {DASH} {high}"


def _status(result: LabResult) -> Paragraph:
    if result.status == ResultStatus.AMENDED:
        return Paragraph(f"<b>Amended</b>: {escape(printable(result.reason))}", CELL)
    return _text(result.status.capitalize())


_COLUMNS = ("Analyte", "Result", "Flag", "Reference range", "Status")
_WIDTHS: Sequence[float] = (WIDTH * 0.28, WIDTH * 0.18, WIDTH * 0.14, WIDTH * 0.16, WIDTH * 0.24)


def _results_table(results: list[LabResult]) -> Table:
    rows: list[list[Any]] = [[Paragraph(name, HEAD) for name in _COLUMNS]]
    critical_rows = []
    for number, result in enumerate(results, start=1):
        name = result.analyte.name if result.analyte is not None else "Report"
        rows.append([_text(name), _text(_value(result)), _flag(result), _text(_range(result)), _status(result)])
        if result.flag in CRITICAL:
            critical_rows.append(number)
    table = Table(rows, colWidths=list(_WIDTHS), repeatRows=1)
    style: list[tuple[Any, ...]] = list(GRID_STYLE)
    style += [("BOX", (0, row), (-1, row), 0.9, MARK) for row in critical_rows]
    table.setStyle(TableStyle(style))
    return table


def _item(item: LabOrderItem) -> list[Flowable]:
    test = item.test
    source = ("Modality", test.modality) if test.kind == TestKind.IMAGING else ("Specimen", test.specimen_type)
    heading = Paragraph(f"{escape(printable(test.name))} ({escape(printable(test.code))})", SECTION)
    facts = Paragraph(
        " &nbsp; ".join(
            f"<b>{key}:</b> {escape(printable(value or '-'))}"
            for key, value in (
                ("Accession", item.accession_number),
                source,
                ("Status", item.status.replace("_", " ").capitalize()),
            )
        ),
        BODY,
    )
    results = _current(item)
    body: list[Flowable]
    if not results:
        body = [_text("No results yet.", SMALL)]
    elif test.kind == TestKind.IMAGING:
        body = []
        for report in results:
            body += [_text(line, BODY) for line in (report.value_text or "").splitlines() if line.strip()]
            body.append(_text(f"{report.status.capitalize()} - {report.performer}", SMALL))
            if report.status == ResultStatus.AMENDED:
                body.append(Paragraph(f"<b>Amended</b>: {escape(printable(report.reason))}", SMALL))
    else:
        body = [_results_table(results)]
    return [KeepTogether([heading, facts, Spacer(1, 3), *body[:1]]), *body[1:], Spacer(1, 8)]


def _story(order: LabOrder) -> list[Flowable]:
    story: list[Flowable] = [_header(order), _patient(order)]
    for item in order.items.all():
        story += _item(item)
    if _preliminary(order):
        story.append(Paragraph(f"<b>{PRELIMINARY_NOTE}</b>", BODY))
    return story


def _preliminary(order: LabOrder) -> bool:
    return any(r.status == ResultStatus.PRELIMINARY for item in order.items.all() for r in _current(item))


def _footer(order: LabOrder, preliminary: bool) -> Any:
    left = f"Laboratory report {order.order_number}" + (f" - {PRELIMINARY_NOTE}" if preliminary else "")

    def draw(canvas: Any, template: Any) -> None:
        canvas.saveState()
        canvas.setFont(FONT, 7)
        canvas.drawString(MARGIN, 8 * mm, left)
        canvas.drawRightString(A4[0] - MARGIN, 8 * mm, f"Page {canvas.getPageNumber()}")
        canvas.restoreState()

    return draw


def render_lab_report(order: LabOrder) -> bytes:
    """The whole PDF of an order loaded by lab.selectors.lab_order_get (or lab_order_load), or RenderError
    (with the cause chained) when ReportLab cannot build it."""
    try:
        return a4_pdf(
            _story(order),
            title=f"Laboratory report {order.order_number}",
            author=order.branch.name,
            subject="Laboratory report",
            creator="Clinic lab",
            on_page=_footer(order, _preliminary(order)),
        )
    except Exception as exc:  # any failure of the third-party layout is a RenderError
        raise RenderError(f"Could not render the laboratory report of order {order.order_number}.") from exc


def lab_report_response(order: LabOrder) -> HttpResponse:
    """The report, shown in the browser (inline) under the order number as the file name."""
    return inline_response(render_lab_report(order), f"{order.order_number}.pdf")
