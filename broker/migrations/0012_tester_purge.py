"""The tester-data purge: the purge permit, the trail's `tester.purged` kind, and
the guards again, whose delete guards now let a permitted purge of tester rows through."""

from django.db import migrations, models

from broker import guards


def install(apps, schema_editor):
    # As 0004: SQLite and PostgreSQL only, and installing replaces what is there.
    if schema_editor.connection.vendor in guards.VENDORS:
        guards.install(schema_editor)


class Migration(migrations.Migration):

    dependencies = [
        ('broker', '0011_suite_runs'),
    ]

    operations = [
        # Reversed last: with the permit table gone, the guards refuse every delete again (a
        # SQLite trigger naming the missing table would fail every later table rebuild).
        migrations.RunPython(migrations.RunPython.noop, install),
        migrations.CreateModel(
            name='PurgePermit',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('txid', models.BigIntegerField(blank=True, null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
        ),
        migrations.RemoveConstraint(
            model_name='trailrow',
            name='trail_kind_known',
        ),
        migrations.AlterField(
            model_name='trailrow',
            name='kind',
            field=models.CharField(choices=[('message', 'Message'), ('claim.ended', 'Claim Ended'), ('instance.ended', 'Instance Ended'), ('decision', 'Decision'), ('thread.renamed', 'Thread Renamed'), ('thread.archived', 'Thread Archived'), ('thread.unarchived', 'Thread Unarchived'), ('tester.purged', 'Tester Purged')], default='message', max_length=20),
        ),
        migrations.AddConstraint(
            model_name='trailrow',
            constraint=models.CheckConstraint(condition=models.Q(('kind__in', ['message', 'claim.ended', 'instance.ended', 'decision', 'thread.renamed', 'thread.archived', 'thread.unarchived', 'tester.purged'])), name='trail_kind_known'),
        ),
        migrations.RunPython(install, migrations.RunPython.noop),
    ]
