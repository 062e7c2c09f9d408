"""A partial index of the current critical results nobody has acknowledged yet (the staff's list and the
dashboard's count), built without blocking writes."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models
from django.db.models import Q


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("lab", "0007_critical_acknowledgement")]

    operations = [
        AddIndexConcurrently(
            model_name="labresult",
            index=models.Index(
                fields=["item"],
                condition=Q(current=True, flag__in=("LL", "HH"), critical_acknowledged_at__isnull=True),
                name="labresult_critical_open",
            ),
        ),
    ]
