"""Critical results verified before acknowledgements existed count as acknowledged when they were recorded.

Until lab 0007 a critical value was dealt with by verifying it: nothing else was recorded. Left unacknowledged,
every such value of the laboratory's history would fill the list of critical results awaiting acknowledgement
(and its dashboard card) with values the doctor heard of long ago, hiding the ones that need a call now. So
each current final or amended critical result gets the acknowledgement its verification was, at its recording
time, by "verified before acknowledgement"; preliminary ones stay on the list (docs/staff.md §5). The versions
trigger allows exactly this change.
"""

from django.db import migrations

ACKNOWLEDGE_HISTORY = """
UPDATE lab_labresult
   SET critical_acknowledged_at = recorded_at,
       critical_acknowledged_by = 'verified before acknowledgement'
 WHERE current
   AND flag IN ('LL', 'HH')
   AND status IN ('final', 'amended')
   AND critical_acknowledged_at IS NULL
"""


class Migration(migrations.Migration):
    dependencies = [("lab", "0009_admin_list_order")]

    operations = [migrations.RunSQL(ACKNOWLEDGE_HISTORY, migrations.RunSQL.noop)]
