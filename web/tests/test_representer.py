"""A job's answer as the planned representer writes it (web/rest.py) is DRF's own answer, for
jobs of every kind, before and after their first run."""

import pytest
from rest_framework import serializers

from jobs.models import Job
from web.api.job_serializers import JobOutputSerializer
from web.api.jobs import represent_job
from web.rest import representer

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "fields",
    [
        {"type": "ONCE", "payload": {"a": [1, True, None]}, "priority": 0},
        {"type": "DELAYED", "jitter": False, "max_attempts": 1},
        {"type": "CRON", "schedule": "H 3 * * *", "timezone": "Europe/Paris", "priority": 2},
        {"type": "EVENT", "event_name": "order.paid", "event_filter": {"plan": "pro"}, "schedule": ""},
        {
            "type": "CRON",
            "workflow": {"steps": [{"name": "a", "target": {"pool": "default", "handler": "noop"}}]},
        },
    ],
)
def test_a_jobs_answer_is_drfs_own(tenant, make_job, drive, fields):
    job = make_job(tenant, **fields)
    assert represent_job(job) == JobOutputSerializer(job).data
    if not job.workflow and (execution := job.executions.first()) is not None:
        drive(execution, "SUCCEEDED")  # a last run to show
        job = Job.objects.get(pk=job.pk)
        assert represent_job(job) == JobOutputSerializer(job).data


def test_each_plain_field_writes_what_drf_writes():
    class Answer(serializers.Serializer):
        text = serializers.CharField()
        number = serializers.IntegerField()
        flag = serializers.BooleanField()
        maybe = serializers.BooleanField(allow_null=True)
        data = serializers.JSONField()
        packed = serializers.JSONField(binary=True)
        said = serializers.SerializerMethodField()

        def get_said(self, row) -> str:
            return f"{row.text}!"

    class Row:
        def __init__(self, **values):
            self.__dict__.update(values)

    for row in [
        Row(text="a", number=1, flag=True, maybe=None, data={"a": 1}, packed=[1]),
        Row(text=7, number="8", flag="yes", maybe="", data=None, packed={"b": None}),
        Row(text="", number=True, flag=0, maybe=False, data=[True], packed="x"),
    ]:
        assert representer(Answer())(row) == Answer(row).data
