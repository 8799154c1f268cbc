"""Install the guards again, with the delete guards of threads and tasks (SPEC §3): a raw DELETE
(a database shell, a script) removed a human's thread, leaving its rows pointing at nothing
where foreign keys are off, or a task. The tester-data purge's permit still lets a tester-owned
thread go."""

from django.db import migrations

from broker import guards


class Migration(migrations.Migration):

    dependencies = [
        ("broker", "0015_claims_per_instance"),
    ]

    operations = [
        # The reverse keeps the stricter guards: the older ones refused less, never more.
        migrations.RunPython(guards.install_in_migration, migrations.RunPython.noop),
    ]
