"""The imaging worklist (integrations.dicom): each item's scheduled time and MPPS instance UID, the stations
(a branch's modality AE titles). Safe while the release before serves: the columns come with database
defaults (no table rewrite; the old release's inserts get them too), the backfill sets the imaging items'
scheduled time to their order's, and the indexes are built concurrently."""

import django.core.validators
import django.db.models.deletion
import django.db.models.functions.datetime
import uuid
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('clinic', '0005_branch_state_known'),
        ('lab', '0002_laborder_branch_created_cover'),
    ]

    operations = [
        migrations.CreateModel(
            name='ImagingStation',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('modality', models.CharField(choices=[('CT', 'CT (computed tomography)'), ('MR', 'MR (magnetic resonance)'), ('US', 'US (ultrasound)'), ('XR', 'XR (X-ray)'), ('DX', 'DX (digital radiography)'), ('MG', 'MG (mammography)'), ('NM', 'NM (nuclear medicine)'), ('PT', 'PT (positron emission tomography)')], max_length=2)),
                ('ae_title', models.CharField(max_length=16, validators=[django.core.validators.RegexValidator('^[!-Z^-~][ -Z^-~]{0,15}$', '1 to 16 printable ASCII characters, no backslash (a DICOM AE title).')], verbose_name='AE title')),
                ('name', models.CharField(blank=True, help_text='e.g. Room 2 CT scanner.', max_length=100)),
            ],
            options={
                'verbose_name': 'imaging station (DICOM modality)',
                'ordering': ['branch', 'modality'],
            },
        ),
        migrations.AddField(
            model_name='laborderitem',
            name='mpps_instance_uid',
            field=models.CharField(blank=True, db_default='', default='', editable=False, max_length=64),
        ),
        migrations.AddField(
            model_name='laborderitem',
            name='scheduled_at',
            field=models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
        ),
        migrations.RunSQL(
            """
            UPDATE lab_laborderitem AS item SET scheduled_at = o.created_at
            FROM lab_laborder AS o, lab_labtest AS t
            WHERE o.id = item.order_id AND t.id = item.test_id AND t.kind = 'imaging'
            """,
            migrations.RunSQL.noop,
        ),
        AddIndexConcurrently(
            model_name='laborderitem',
            index=models.Index(condition=models.Q(('status__in', ('scheduled', 'in_progress'))), fields=['scheduled_at'], name='laborderitem_worklist'),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddConstraint(
                    model_name='laborderitem',
                    constraint=models.UniqueConstraint(condition=models.Q(('mpps_instance_uid', ''), _negated=True), fields=('mpps_instance_uid',), name='laborderitem_mpps_uid_unique'),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    "CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS laborderitem_mpps_uid_unique "
                    "ON lab_laborderitem (mpps_instance_uid) WHERE NOT (mpps_instance_uid = '')",
                    "DROP INDEX CONCURRENTLY IF EXISTS laborderitem_mpps_uid_unique",
                ),
            ],
        ),
        migrations.AddField(
            model_name='imagingstation',
            name='branch',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='imaging_stations', to='clinic.branch'),
        ),
        migrations.AddConstraint(
            model_name='imagingstation',
            constraint=models.UniqueConstraint(fields=('branch', 'modality'), name='imagingstation_one_per_branch_modality'),
        ),
        migrations.AddConstraint(
            model_name='imagingstation',
            constraint=models.CheckConstraint(condition=models.Q(('modality__in', ['CT', 'MR', 'US', 'XR', 'DX', 'MG', 'NM', 'PT'])), name='imagingstation_modality_valid'),
        ),
        migrations.AddConstraint(
            model_name='imagingstation',
            constraint=models.CheckConstraint(condition=models.Q(('ae_title__regex', '^[!-Z^-~][ -Z^-~]{0,15}$')), name='imagingstation_ae_title_format'),
        ),
    ]
