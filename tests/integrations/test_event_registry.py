"""The event registry: kinds registered by their owning apps, refused when unknown, offered by the admin forms
and the command as registered (no migration for a new kind), and documented in the OpenAPI document."""

from __future__ import annotations

import dataclasses
import re

import pytest
from django.core.exceptions import ImproperlyConfigured

from appointments import events as appointment_events
from clinic.api.openapi_paths import webhooks as _webhooks
from integrations.models import NotificationSettings, WebhookEvent, WebhookSubscription
from integrations.notifications.admin import NotificationSettingsForm
from integrations.notifications.services import notification_channels
from integrations.webhooks import registry
from integrations.webhooks.admin import WebhookSubscriptionForm
from integrations.webhooks.events import event_publish
from integrations.webhooks.registry import (
    EventKind,
    EventRegistry,
    PayloadPart,
    UnknownEventKind,
    event_kind_get,
    event_kind_register,
    event_kinds,
    event_kinds_notifying,
)
from tests.factories import BranchFactory, network_wide
from tests.integrations.webhook_receiver import ALL_KINDS, fake_dns, subscribe

__all__ = ["fake_dns"]

SUBSCRIPTION_ADD_URL = "/admin/integrations/webhooksubscription/add/"
NOTIFICATION_SETTINGS_URL = "/admin/integrations/notificationsettings/1/change/"
APPOINTMENT = PayloadPart("appointment", "Appointment")
# A kind of an app that does not exist: whatever integrations does with it, it learnt from the registry.
WIDGET_MADE = EventKind(
    "widget.made",
    label="widget made",
    description="A widget was made.",
    payload=(APPOINTMENT,),
    notification_label="when a widget is made",
)


@pytest.fixture
def widget_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry of the running apps plus WIDGET_MADE (monkeypatch restores the real one afterwards)."""
    extended = EventRegistry()
    extended.register(*event_kinds(), WIDGET_MADE)
    monkeypatch.setattr(registry, "_registry", extended)


@pytest.fixture
def staff(client, django_user_model):
    client.force_login(network_wide(django_user_model.objects.create_superuser("root", "root@example.com", None)))
    return client


def checkboxes(html: str, name: str) -> list[tuple[str, str]]:
    """(value, label text) of every checkbox named `name`, in page order."""
    pattern = rf'<label[^>]*><input type="checkbox" name="{name}" value="([^"]+)"[^>]*>\s*([^<]*?)\s*</label>'
    return re.findall(pattern, html)


# --- Registration ---------------------------------------------------------------------------------------


def test_the_appointment_kinds_are_registered_by_the_appointments_app_in_order():
    assert [kind.name for kind in event_kinds() if kind.name.startswith("appointment.")] == ALL_KINDS
    # Apps register in INSTALLED_APPS order: the patient kinds (patients.events) come first.
    assert [kind.name for kind in event_kinds()][:2] == ["patient.registered", "patient.updated"]
    assert event_kind_get(appointment_events.APPOINTMENT_RESCHEDULED).payload == (
        PayloadPart("appointment", "Appointment"),
        PayloadPart("previous", "Appointment", "The representation before the change."),
    )
    assert [(kind.name, kind.notification_label) for kind in event_kinds_notifying()] == [
        ("appointment.booked", "when an appointment is booked"),
        ("appointment.rescheduled", "when an appointment is rescheduled"),
        ("appointment.cancelled", "when an appointment is cancelled"),
        ("lab_result.finalized", "when lab or imaging results are ready"),
    ]


def test_a_kind_registered_twice_with_different_definitions_raises():
    kinds = EventRegistry()
    kinds.register(WIDGET_MADE)
    changed = EventKind("widget.made", label="made", description="A widget was made.", payload=(APPOINTMENT,))

    with pytest.raises(ImproperlyConfigured, match=r"'widget\.made' is registered twice with different definitions"):
        kinds.register(changed)
    assert kinds.kinds() == [WIDGET_MADE]


def test_an_appointment_kind_registered_again_differently_raises_and_the_registry_keeps_the_first():
    booked = event_kind_get(appointment_events.APPOINTMENT_BOOKED)
    impostor = EventKind(booked.name, label=booked.label, description="Something else.", payload=booked.payload)

    with pytest.raises(ImproperlyConfigured, match="registered twice"):
        event_kind_register(impostor)
    assert event_kind_get(appointment_events.APPOINTMENT_BOOKED) is booked


def test_registering_the_same_definition_again_is_harmless():
    kinds = EventRegistry()
    kinds.register(WIDGET_MADE)
    kinds.register(dataclasses.replace(WIDGET_MADE))  # equal, not the same object
    assert kinds.kinds() == [WIDGET_MADE]
    appointment_events.events_register()  # as a second AppConfig.ready() would
    assert [kind.name for kind in event_kinds() if kind.name.startswith("appointment.")] == ALL_KINDS


@pytest.mark.parametrize("name", ["booked", "Appointment.booked", "appointment.", "a.b.c", "x." + "y" * 39])
def test_a_kind_whose_name_is_not_entity_dot_past_tense_is_refused(name):
    with pytest.raises(ImproperlyConfigured, match=re.escape("<entity>.<past tense>")):
        EventRegistry().register(EventKind(name, label=name, description="", payload=(APPOINTMENT,)))


def test_a_kind_without_payload_is_refused():
    with pytest.raises(ImproperlyConfigured, match="declares no payload"):
        EventRegistry().register(EventKind("widget.made", label="made", description="", payload=()))


# --- Publication ----------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_publishing_an_unregistered_kind_raises_and_writes_nothing():
    with pytest.raises(UnknownEventKind, match=r"Unknown event type 'widget\.made'"):
        event_publish(event_type=WIDGET_MADE.name, payload={"appointment": {}})
    assert not WebhookEvent.objects.exists()


@pytest.mark.django_db
def test_a_kind_registered_by_any_app_is_published_and_delivered_to_its_subscribers(widget_registered, fake_dns):
    subscription, _ = subscribe("https://hooks.example.com/widgets", ["widget.made"])

    event_id = event_publish(event_type="widget.made", payload={"appointment": {}})

    event = WebhookEvent.objects.get()
    assert (event.id, event.type) == (event_id, "widget.made")
    assert [delivery.subscription_id for delivery in event.deliveries.all()] == [subscription.pk]


# --- Subscriptions: the admin form and the command ------------------------------------------------------


def test_the_subscription_form_offers_exactly_the_registered_kinds():
    choices = list(WebhookSubscriptionForm().fields["event_types"].choices)
    assert [value for value, _ in choices] == [kind.name for kind in event_kinds()]
    assert ("appointment.booked", "appointment.booked: An appointment was booked.") in choices
    assert ("patient.registered", "patient.registered: A patient was registered.") in choices


@pytest.mark.django_db
def test_the_subscription_add_page_offers_exactly_the_registered_kinds(staff):
    page = staff.get(SUBSCRIPTION_ADD_URL).content.decode()
    assert [value for value, _ in checkboxes(page, "event_types")] == [kind.name for kind in event_kinds()]


@pytest.mark.django_db
def test_a_kind_registered_later_is_offered_and_subscribable_without_a_migration(widget_registered, staff, fake_dns):
    page = staff.get(SUBSCRIPTION_ADD_URL).content.decode()
    offered = [value for value, _ in checkboxes(page, "event_types")]
    assert offered == [kind.name for kind in event_kinds()]
    assert offered[-1] == "widget.made"

    response = staff.post(
        SUBSCRIPTION_ADD_URL,
        {
            "name": "Widgets",
            "target_url": "https://hooks.example.com/widgets",
            "event_types": ["widget.made", "appointment.booked"],
            "extra_headers": "",
            "is_active": "on",
        },
    )

    assert response.status_code == 200, response.content
    assert WebhookSubscription.objects.get().event_types == ["appointment.booked", "widget.made"]
    listing = staff.get("/admin/integrations/webhooksubscription/").content.decode()
    assert "appointment.booked, widget.made" in listing  # whole kinds: "made" alone says nothing


@pytest.mark.django_db
def test_a_subscription_to_an_unregistered_kind_is_refused(fake_dns):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError, match=r"Unknown event kinds: widget\.made"):
        subscribe("https://hooks.example.com/", ["appointment.booked", "widget.made"])
    assert not WebhookSubscription.objects.exists()


@pytest.mark.django_db
def test_the_command_takes_all_as_every_registered_kind(widget_registered, fake_dns):
    from io import StringIO

    from django.core.management import call_command

    call_command(
        "create_webhook_subscription", "--name", "All", "--url", "https://hooks.example.com/", "--events", "all",
        stdout=StringIO(),
    )  # fmt: skip
    assert WebhookSubscription.objects.get().event_types == [kind.name for kind in event_kinds()]
    assert WebhookSubscription.objects.get().event_types[-1] == "widget.made"


# --- Notification settings ------------------------------------------------------------------------------


def test_the_notification_settings_form_offers_the_notifying_kinds_with_their_labels():
    assert list(NotificationSettingsForm().fields["event_kinds"].choices) == [
        ("appointment.booked", "when an appointment is booked"),
        ("appointment.rescheduled", "when an appointment is rescheduled"),
        ("appointment.cancelled", "when an appointment is cancelled"),
        ("lab_result.finalized", "when lab or imaging results are ready"),
    ]


@pytest.mark.django_db
def test_the_notification_settings_page_shows_the_notifying_kinds_and_which_are_on(staff):
    config = NotificationSettings.load()
    config.event_kinds = ["appointment.cancelled"]
    config.save()

    page = staff.get(NOTIFICATION_SETTINGS_URL).content.decode()

    assert checkboxes(page, "event_kinds") == [
        ("appointment.booked", "when an appointment is booked"),
        ("appointment.rescheduled", "when an appointment is rescheduled"),
        ("appointment.cancelled", "when an appointment is cancelled"),
        ("lab_result.finalized", "when lab or imaging results are ready"),
    ]
    checked = re.findall(r'name="event_kinds" value="([^"]+)"[^>]*checked', page)
    assert checked == ["appointment.cancelled"]


@pytest.mark.django_db
def test_new_notification_settings_notify_on_every_notifying_kind():
    assert NotificationSettings.load().event_kinds == [
        "appointment.booked",
        "appointment.rescheduled",
        "appointment.cancelled",
        "lab_result.finalized",
    ]


@pytest.mark.django_db
def test_notification_channels_follow_the_registry_and_the_settings_for_any_domain(widget_registered, staff):
    branch = BranchFactory()
    config = NotificationSettings.load()
    assert config.event_kinds == [
        *ALL_KINDS[:3],
        "lab_result.finalized",
        "widget.made",
    ]  # the default: every kind that may notify
    config.sms_enabled = True
    config.event_kinds = ALL_KINDS[:3]
    config.save()
    assert notification_channels(event_type="widget.made", branch_id=branch.pk) == []

    response = staff.post(NOTIFICATION_SETTINGS_URL, {"sms_enabled": "on", "event_kinds": ["widget.made"]})

    assert response.status_code == 302
    assert NotificationSettings.load().event_kinds == ["widget.made"]
    assert notification_channels(event_type="widget.made", branch_id=branch.pk) == ["sms"]
    assert notification_channels(event_type="appointment.booked", branch_id=branch.pk) == []
    # A kind that may not notify never does, whatever the stored list says.
    config.refresh_from_db()
    config.event_kinds = ["appointment.completed"]
    config.save()
    assert notification_channels(event_type="appointment.completed", branch_id=branch.pk) == []
    with pytest.raises(UnknownEventKind):
        notification_channels(event_type="appointment.deleted", branch_id=branch.pk)


# --- The OpenAPI document -------------------------------------------------------------------------------


def test_the_webhooks_section_documents_each_kind_with_its_declared_payload(widget_registered):
    section = _webhooks({part.component: {} for kind in event_kinds() for part in kind.payload})

    assert list(section) == [kind.name for kind in event_kinds()]
    assert list(section)[-1] == "widget.made"
    data = section["widget.made"]["post"]["requestBody"]["content"]["application/json"]["schema"]["properties"]
    assert data["type"] == {"type": "string", "enum": ["widget.made"]}
    assert data["data"] == {
        "type": "object",
        "required": ["appointment"],
        "properties": {"appointment": {"$ref": "#/components/schemas/Appointment"}},
    }


def test_a_kind_whose_payload_component_does_not_exist_fails_the_schema_generation():
    first = event_kinds()[0]
    with pytest.raises(LookupError, match=rf"The event {re.escape(first.name)} has no payload schema"):
        _webhooks({})
    with pytest.raises(LookupError, match=r"The event appointment\.booked has no payload schema"):
        _webhooks({"PatientProfile": {}})
