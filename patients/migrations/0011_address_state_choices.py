"""Patient addresses name the state from the closed list (docs/api-rules.md §12): the column takes the choices
of clinic.states.IndianState (the admin's select) and the stored values are normalised.

Every distinct stored value that clinic.states.state_resolve recognises ("karnataka", "IN-KA", "29",
"Orissa") becomes the canonical name, and a value of whitespace only becomes "" (unknown). It is one
UPDATE joined to the mapping of the distinct values: one pass over the table, whatever the number of
variants. A value the resolver does not recognise ("Karnatka") is not guessed at: those rows keep it and
are reported, one line per patient (its patient_id and the value), on stdout and in the log, for staff to
correct in the admin. That is also why there is no CHECK constraint on the column.

The live resolver is used on purpose: the mapping is the product's rule, and a database migrated later
should get the rule of its day (if state_resolve ever goes, squash this migration). Backwards there is
nothing to undo: canonical names were valid values before.
"""

import logging

from django.db import migrations, models

from clinic.states import state_resolve

logger = logging.getLogger(__name__)


def address_states_normalise(apps, schema_editor):
    Patient = apps.get_model("patients", "Patient")
    connection = schema_editor.connection
    patients = Patient.objects.using(connection.alias).order_by()
    mapping, unknown = {}, []
    for value in patients.values_list("address_state", flat=True).distinct():
        state = state_resolve(value)
        if state is None and value.strip():
            unknown.append(value)
        elif (canonical := state.value if state else "") != value:
            mapping[value] = canonical  # "" for whitespace only: no state given
    if mapping:
        quote = connection.ops.quote_name
        table, column = quote(Patient._meta.db_table), quote(Patient._meta.get_field("address_state").column)
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {table} AS patient SET {column} = mapping.canonical"
                " FROM unnest(%s::text[], %s::text[]) AS mapping (raw, canonical)"
                f" WHERE patient.{column} = mapping.raw",
                [list(mapping), list(mapping.values())],
            )
            changed = cursor.rowcount
        _report(logging.INFO, f"patients: address_state normalised on {changed} rows ({len(mapping)} distinct values).")
    if unknown:
        rows = patients.filter(address_state__in=unknown).order_by("patient_id")
        count = 0
        for patient_id, value in rows.values_list("patient_id", "address_state").iterator():
            count += 1
            _report(
                logging.WARNING,
                f"patients: {patient_id} address_state {value!r} is not an Indian state or union territory;"
                " left unchanged.",
            )
        _report(logging.WARNING, f"patients: {count} rows keep an unrecognised address_state; correct them in the admin.")


def _report(level, line):
    print(line)
    logger.log(level, line)


class Migration(migrations.Migration):

    dependencies = [
        ('patients', '0010_visit_history_entered_in_error'),
    ]

    operations = [
        migrations.RunPython(address_states_normalise, migrations.RunPython.noop, elidable=True),
        migrations.AlterField(
            model_name='patient',
            name='address_state',
            field=models.CharField(blank=True, choices=[('Jammu and Kashmir', 'Jammu and Kashmir'), ('Himachal Pradesh', 'Himachal Pradesh'), ('Punjab', 'Punjab'), ('Chandigarh', 'Chandigarh'), ('Uttarakhand', 'Uttarakhand'), ('Haryana', 'Haryana'), ('Delhi', 'Delhi'), ('Rajasthan', 'Rajasthan'), ('Uttar Pradesh', 'Uttar Pradesh'), ('Bihar', 'Bihar'), ('Sikkim', 'Sikkim'), ('Arunachal Pradesh', 'Arunachal Pradesh'), ('Nagaland', 'Nagaland'), ('Manipur', 'Manipur'), ('Mizoram', 'Mizoram'), ('Tripura', 'Tripura'), ('Meghalaya', 'Meghalaya'), ('Assam', 'Assam'), ('West Bengal', 'West Bengal'), ('Jharkhand', 'Jharkhand'), ('Odisha', 'Odisha'), ('Chhattisgarh', 'Chhattisgarh'), ('Madhya Pradesh', 'Madhya Pradesh'), ('Gujarat', 'Gujarat'), ('Dadra and Nagar Haveli and Daman and Diu', 'Dadra and Nagar Haveli and Daman and Diu'), ('Maharashtra', 'Maharashtra'), ('Karnataka', 'Karnataka'), ('Goa', 'Goa'), ('Lakshadweep', 'Lakshadweep'), ('Kerala', 'Kerala'), ('Tamil Nadu', 'Tamil Nadu'), ('Puducherry', 'Puducherry'), ('Andaman and Nicobar Islands', 'Andaman and Nicobar Islands'), ('Telangana', 'Telangana'), ('Andhra Pradesh', 'Andhra Pradesh'), ('Ladakh', 'Ladakh')], max_length=100),
        ),
    ]
