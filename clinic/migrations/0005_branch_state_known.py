"""A branch's state is one of the closed list of Indian states and union territories (docs/api-rules.md §12),
enforced by a CHECK constraint: it decides CGST+SGST or IGST on every invoice of the branch.

First the stored values are normalised: each distinct value that clinic.states.state_resolve recognises
("karnataka", "IN-KA", "29") becomes the canonical name (one UPDATE per distinct value; branches are few).
Unlike a patient's address, a branch's state is not left as it was when it names no state: branches are
few and configured by admins, and a branch without a known state cannot be taxed correctly. Such a branch
makes this migration fail, naming the branch and its value, before anything is changed; set its state
and migrate again. Backwards, the constraint is dropped and the names stay (they were valid before).
"""

import logging

from django.db import migrations, models

from clinic.states import state_resolve

logger = logging.getLogger(__name__)


class UnknownBranchState(Exception):
    """A branch whose state names no Indian state or union territory."""


def branch_states_normalise(apps, schema_editor):
    Branch = apps.get_model("clinic", "Branch")
    branches = Branch.objects.using(schema_editor.connection.alias).order_by()
    mapping, unknown = {}, []
    for value in branches.values_list("state", flat=True).distinct():
        state = state_resolve(value)
        if state is None:
            unknown.append(value)
        elif state.value != value:
            mapping[value] = state.value
    if unknown:
        rows = branches.filter(state__in=unknown).order_by("code").values_list("code", "state")
        lines = [f"Branch {code} has state {value!r}, which is not an Indian state or union territory." for code, value in rows]
        raise UnknownBranchState(
            "\n".join(
                [
                    *lines,
                    "Nothing was changed. Set each branch's state to one of the names of clinic.states.IndianState "
                    "(its ISO 3166-2:IN or GST state code also works), e.g. "
                    "UPDATE clinic_branch SET state = 'Karnataka' WHERE code = 'BLR'; then migrate again.",
                ]
            )
        )
    for value, canonical in mapping.items():
        changed = branches.filter(state=value).update(state=canonical)
        line = f"clinic: branch state {value!r} normalised to {canonical!r} on {changed} branches."
        print(line)
        logger.info(line)


class Migration(migrations.Migration):

    dependencies = [
        ('clinic', '0004_column_defaults'),
    ]

    operations = [
        migrations.RunPython(branch_states_normalise, migrations.RunPython.noop, elidable=True),
        migrations.AlterField(
            model_name='branch',
            name='state',
            field=models.CharField(choices=[('Jammu and Kashmir', 'Jammu and Kashmir'), ('Himachal Pradesh', 'Himachal Pradesh'), ('Punjab', 'Punjab'), ('Chandigarh', 'Chandigarh'), ('Uttarakhand', 'Uttarakhand'), ('Haryana', 'Haryana'), ('Delhi', 'Delhi'), ('Rajasthan', 'Rajasthan'), ('Uttar Pradesh', 'Uttar Pradesh'), ('Bihar', 'Bihar'), ('Sikkim', 'Sikkim'), ('Arunachal Pradesh', 'Arunachal Pradesh'), ('Nagaland', 'Nagaland'), ('Manipur', 'Manipur'), ('Mizoram', 'Mizoram'), ('Tripura', 'Tripura'), ('Meghalaya', 'Meghalaya'), ('Assam', 'Assam'), ('West Bengal', 'West Bengal'), ('Jharkhand', 'Jharkhand'), ('Odisha', 'Odisha'), ('Chhattisgarh', 'Chhattisgarh'), ('Madhya Pradesh', 'Madhya Pradesh'), ('Gujarat', 'Gujarat'), ('Dadra and Nagar Haveli and Daman and Diu', 'Dadra and Nagar Haveli and Daman and Diu'), ('Maharashtra', 'Maharashtra'), ('Karnataka', 'Karnataka'), ('Goa', 'Goa'), ('Lakshadweep', 'Lakshadweep'), ('Kerala', 'Kerala'), ('Tamil Nadu', 'Tamil Nadu'), ('Puducherry', 'Puducherry'), ('Andaman and Nicobar Islands', 'Andaman and Nicobar Islands'), ('Telangana', 'Telangana'), ('Andhra Pradesh', 'Andhra Pradesh'), ('Ladakh', 'Ladakh')], max_length=60),
        ),
        migrations.AddConstraint(
            model_name='branch',
            constraint=models.CheckConstraint(condition=models.Q(('state__in', ['Jammu and Kashmir', 'Himachal Pradesh', 'Punjab', 'Chandigarh', 'Uttarakhand', 'Haryana', 'Delhi', 'Rajasthan', 'Uttar Pradesh', 'Bihar', 'Sikkim', 'Arunachal Pradesh', 'Nagaland', 'Manipur', 'Mizoram', 'Tripura', 'Meghalaya', 'Assam', 'West Bengal', 'Jharkhand', 'Odisha', 'Chhattisgarh', 'Madhya Pradesh', 'Gujarat', 'Dadra and Nagar Haveli and Daman and Diu', 'Maharashtra', 'Karnataka', 'Goa', 'Lakshadweep', 'Kerala', 'Tamil Nadu', 'Puducherry', 'Andaman and Nicobar Islands', 'Telangana', 'Andhra Pradesh', 'Ladakh'])), name='branch_state_known', violation_error_message='Choose the state from the list of Indian states and union territories.'),
        ),
    ]
