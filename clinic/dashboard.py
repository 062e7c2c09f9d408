"""The admin's home page per role (docs/staff.md): at-a-glance numbers and charts, each linking to the
list that shows the same rows. Which sections a staff member sees follows their permissions (a receptionist
sees the front desk; an administrator every section); every number is read through `staff_reader`, so it
counts the rows of their branches only. Like the commands that span every app, this interface composes the
apps' selectors (their "Dashboard reads"); it writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from functools import cache
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import SafeString

from appointments.models import Appointment
from appointments.selectors import DoctorQueue, queue_of_day
from billing.selectors import CollectionRow, collections_of_day
from clinic.lib.charts import bar_chart
from clinic.selectors import branch_days_today
from clinic.staff import staff_reader
from lab.models import Priority
from lab.selectors import (
    OPEN_ORDER_STATUSES,
    lab_work_today,
    orders_with_critical_unacknowledged,
    visible_lab_orders,
)
from pharmacy.selectors import below_reorder, below_reorder_url, expiring_soon, expiring_soon_url

# The queue's columns: what the front desk counts through the day (cancelled appointments are not a queue).
QUEUE_STATUSES = (
    Appointment.Status.BOOKED,
    Appointment.Status.CHECKED_IN,
    Appointment.Status.COMPLETED,
    Appointment.Status.NO_SHOW,
)
# Each section and the permissions that show it (those the journey's role group holds).
SECTION_PERMISSIONS = {
    "reception": ("appointments.view_appointment",),
    "laboratory": ("lab.view_laborder",),
    "pharmacy": ("pharmacy.view_batch",),
    "accounts": ("billing.view_payment", "billing.view_refund"),
}


@dataclass(frozen=True)
class Card:
    label: str
    value: Any
    url: str
    note: str = ""


@dataclass(frozen=True)
class QueueRow:
    queue: DoctorQueue
    cells: list[tuple[int, str]]  # (count, filtered list url) per QUEUE_STATUSES
    waiting: str
    all_url: str


@dataclass
class Section:
    key: str
    title: str
    cards: list[Card] = field(default_factory=list)
    charts: list[SafeString] = field(default_factory=list)
    queue: list[QueueRow] = field(default_factory=list)
    note: str = ""


def _url(name: str, **query: Any) -> str:
    url = _reversed(name)
    return f"{url}?{urlencode(query)}" if query else url


@cache
def _reversed(name: str) -> str:
    # The queue links five times per doctor: the list's address is looked up once.
    return reverse(name)


# A card counts up to this many rows and then says "more than": a backlog of thousands is read the same
# way, and counting all of it would cost more than the rest of the page (docs/staff.md §10).
CARD_COUNT_CAP = 1000


def _capped(rows: Any) -> int | str:
    counted = int(rows.order_by()[: CARD_COUNT_CAP + 1].count())
    return f"more than {CARD_COUNT_CAP:,}" if counted > CARD_COUNT_CAP else counted


def _minutes_since(moment: datetime | None, now: datetime) -> str:
    if moment is None:
        return "nobody waiting"
    minutes = max(0, int((now - moment).total_seconds() // 60))
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


def _reception(reader: Any, days: Any, now: datetime) -> Section:
    section = Section("reception", "Front desk: today's queue")
    changelist = "admin:appointments_appointment_changelist"
    for queue in queue_of_day(client=reader, days=days):
        where = {"branch__id__exact": queue.branch_id, "doctor__id__exact": queue.doctor_id, "local_date": queue.day}
        cells = [(queue.counts[status], _url(changelist, **where, status__exact=status)) for status in QUEUE_STATUSES]
        section.queue.append(
            QueueRow(queue, cells, _minutes_since(queue.waiting_since, now), _url(changelist, **where))
        )
    waiting = sum(row.queue.counts[Appointment.Status.CHECKED_IN] for row in section.queue)
    # One day at every branch (the usual case): the list of that day; else the status alone.
    day = {"local_date": next(iter(days))} if len(days) == 1 else {}
    section.cards.append(Card("Checked in, waiting", waiting, _url(changelist, status__exact="checked_in", **day)))
    section.charts.append(
        bar_chart(
            title="Patients checked in and waiting, per doctor",
            rows=[
                (f"{row.queue.doctor_name} ({row.queue.branch_code})", row.queue.counts["checked_in"])
                for row in section.queue
            ],
        )
    )
    return section


def _laboratory(reader: Any, now: datetime) -> Section:
    work = lab_work_today(client=reader)
    # The same orders the list's "critical: unacknowledged" filter shows, so the card and the list agree.
    critical_orders = _capped(orders_with_critical_unacknowledged(visible_lab_orders(reader)))
    section = Section("laboratory", "Laboratory: work list")
    changelist = "admin:lab_laborder_changelist"
    open_statuses = ",".join(OPEN_ORDER_STATUSES)
    section.cards += [
        Card("Stat orders open", work.open_by_priority[Priority.STAT],
             _url(changelist, status__in=open_statuses, priority__exact=Priority.STAT)),
        Card("Urgent orders open", work.open_by_priority[Priority.URGENT],
             _url(changelist, status__in=open_statuses, priority__exact=Priority.URGENT)),
        Card("All open orders", work.open_orders, _url(changelist, status__in=open_statuses),
             f"oldest open for {_minutes_since(work.oldest_open_since, now)}" if work.oldest_open_since else ""),
        Card("Orders with an unacknowledged critical result", critical_orders,
             _url(changelist, critical="unacknowledged"), "acknowledge on the order's results page"),
    ]  # fmt: skip
    section.charts.append(
        bar_chart(
            title="Open lab orders by priority",
            rows=[(str(label), work.open_by_priority[value]) for value, label in Priority.choices][::-1],
        )
    )
    return section


def _pharmacy(reader: Any) -> Section:
    # Each count is of the rows its link lists (pharmacy.selectors: below_reorder_url, expiring_soon_url).
    section = Section("pharmacy", "Pharmacy: stock alerts")
    section.cards += [
        Card("Drugs below reorder level", below_reorder(client=reader).count(), below_reorder_url(), "per branch"),
        Card(
            f"Batches in stock expiring within {settings.PHARMACY_EXPIRY_WARNING_DAYS} days",
            expiring_soon(client=reader).count(),
            expiring_soon_url(),
        ),
    ]
    return section


def _merged(parts: list[list[CollectionRow]]) -> list[CollectionRow]:
    totals: dict[str, list[Decimal]] = {}
    for rows in parts:
        for row in rows:
            sums = totals.setdefault(row.label, [Decimal("0.00"), Decimal("0.00")])
            sums[0] += row.received
            sums[1] += row.refunded
    return [CollectionRow(label, *sums) for label, sums in totals.items()]


def _accounts(reader: Any, days: Any) -> Section:
    section = Section("accounts", "Accounts: today's collections")
    days_read = [collections_of_day(client=reader, day=day, branch_ids=ids) for day, ids in days.items()]
    by_mode = _merged([part.by_mode for part in days_read])
    by_department = sorted(_merged([part.by_department for part in days_read]), key=lambda row: row.label)
    net = sum((part.net for part in days_read), Decimal("0.00"))
    page = reverse("admin:billing_payment_collections")
    section.cards.append(Card("Collected today (net of refunds)", net, page, "rupees"))
    section.charts += [
        bar_chart(title="Today's collections by payment mode (rupees)", rows=[(r.label, r.net) for r in by_mode]),
        bar_chart(title="Today's collections by department (rupees)", rows=[(r.label, r.net) for r in by_department]),
    ]
    return section


def dashboard_sections(request: HttpRequest) -> list[Section]:
    """The sections the user's permissions show, in the order of the working day."""
    user = request.user
    shown = [key for key, perms in SECTION_PERMISSIONS.items() if user.has_perms(perms)]
    if not shown:
        return []
    reader = staff_reader(user)
    now = timezone.now()
    days = branch_days_today(client=reader)
    builders = {
        "reception": lambda: _reception(reader, days, now),
        "laboratory": lambda: _laboratory(reader, now),
        "pharmacy": lambda: _pharmacy(reader),
        "accounts": lambda: _accounts(reader, days),
    }
    return [builders[key]() for key in shown]
