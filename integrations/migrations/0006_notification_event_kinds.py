"""Event kinds stored generically: the notification settings' three appointment switches become a list of
event names, and the subscriptions' kinds lose their field choices (the registry validates them instead).

The data step maps the switches exactly: on_booked -> "appointment.booked", on_rescheduled ->
"appointment.rescheduled", on_cancelled -> "appointment.cancelled" (these names are wire values, frozen
here as the migration must not depend on today's registry). Backwards, each switch is on when its event
is in the list; kinds that had no switch are dropped.
"""

import django.contrib.postgres.fields
from django.db import migrations, models

import integrations.notifications.models

SWITCHES = (
    ("on_booked", "appointment.booked"),
    ("on_rescheduled", "appointment.rescheduled"),
    ("on_cancelled", "appointment.cancelled"),
)


def switches_to_event_kinds(apps, schema_editor):
    NotificationSettings = apps.get_model("integrations", "NotificationSettings")
    for row in NotificationSettings.objects.all():
        kinds = [kind for column, kind in SWITCHES if getattr(row, column)]
        NotificationSettings.objects.filter(pk=row.pk).update(event_kinds=kinds)


def event_kinds_to_switches(apps, schema_editor):
    NotificationSettings = apps.get_model("integrations", "NotificationSettings")
    for row in NotificationSettings.objects.all():
        switches = {column: kind in row.event_kinds for column, kind in SWITCHES}
        NotificationSettings.objects.filter(pk=row.pk).update(**switches)


class Migration(migrations.Migration):
    dependencies = [
        ("clinic", "0004_column_defaults"),
        ("integrations", "0005_column_defaults"),
    ]

    operations = [
        migrations.AddField(
            model_name="notificationsettings",
            name="event_kinds",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.CharField(max_length=40),
                blank=True,
                default=integrations.notifications.models.notifying_event_kinds,
                help_text="The events that send the patient a notification.",
                size=None,
                verbose_name="notify on",
            ),
        ),
        migrations.RunPython(switches_to_event_kinds, event_kinds_to_switches, elidable=False),
        migrations.RemoveField(model_name="notificationsettings", name="on_booked"),
        migrations.RemoveField(model_name="notificationsettings", name="on_rescheduled"),
        migrations.RemoveField(model_name="notificationsettings", name="on_cancelled"),
        migrations.AlterField(
            model_name="notificationattempt",
            name="subject_id",
            field=models.UUIDField(
                db_index=True, help_text="The id of what the notification is about (the subject of its event)."
            ),
        ),
        migrations.AlterField(
            model_name="notificationsettings",
            name="branches",
            field=models.ManyToManyField(
                blank=True,
                help_text="Only events at these branches (none chosen: every branch).",
                related_name="+",
                to="clinic.branch",
            ),
        ),
        migrations.AlterField(
            model_name="webhookevent",
            name="branch_ref",
            field=models.UUIDField(blank=True, help_text="Branch the event happened at (for the filter).", null=True),
        ),
        migrations.AlterField(
            model_name="webhooksubscription",
            name="branches",
            field=models.ManyToManyField(
                blank=True,
                help_text="Only events at these branches. None selected: every branch.",
                related_name="+",
                to="clinic.branch",
            ),
        ),
        migrations.AlterField(
            model_name="webhooksubscription",
            name="event_types",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.CharField(max_length=40), help_text="Event kinds sent to this target.", size=None
            ),
        ),
    ]
