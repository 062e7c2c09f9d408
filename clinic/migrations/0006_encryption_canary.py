"""The encryption canary /readyz decrypts (clinic.field_encryption). Empty: its row is written at the first
readiness check, under the key the service runs with, once the stored values show that key reads them."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('clinic', '0005_branch_state_known'),
    ]

    operations = [
        migrations.CreateModel(
            name='EncryptionCanary',
            fields=[
                ('id', models.PositiveSmallIntegerField(default=1, editable=False, primary_key=True, serialize=False)),
                ('token', models.TextField()),
                ('written_at', models.DateTimeField()),
            ],
            options={
                'constraints': [models.CheckConstraint(condition=models.Q(('id', 1)), name='encryption_canary_single_row')],
            },
        ),
    ]
