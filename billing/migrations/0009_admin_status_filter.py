"""The invoice list filtered by status at a branch (an accountant's "finalized", awaiting payment) read from an
index in its order, newest first, with its capped count (docs/staff.md §10): at 1M invoices the count read
every invoice of the branch from the table."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False  # built without blocking writes on a table of millions of rows

    dependencies = [
        ('billing', '0008_department_collections'),
        ('clinic', '0007_staff_branches_and_roles'),
        ('patients', '0014_admin_list_order'),
    ]

    operations = [
        AddIndexConcurrently(
            model_name='invoice',
            index=models.Index(fields=['branch', 'status', '-date', '-created_at'], name='invoice_branch_status_date'),
        ),
    ]
