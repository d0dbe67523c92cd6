"""`GET /v1/schedule/preview`: the next fire times of a cron schedule or an interval, before a job
is made of it. No token needed: it reads nothing stored."""

from datetime import timedelta
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs import cron, recurrence
from web.api.job_contract import MAX_EVERY_SEC
from web.api.job_fields import AwareDateTimeField, ScheduleField, TimezoneField


class FireTimeSerializer(serializers.Serializer):
    utc = serializers.CharField(help_text="ISO 8601 in UTC, ending in Z.")
    local = serializers.CharField(help_text="ISO 8601 in the schedule's timezone, with its offset.")


class SchedulePreviewSerializer(serializers.Serializer):
    schedule = serializers.CharField(allow_blank=True, help_text='The cron expression; "" for an interval.')
    everySec = serializers.IntegerField(required=False, help_text="Given for an interval: its period.")
    startAt = serializers.DateTimeField(required=False, help_text="Given for an interval: its anchor.")
    resolvedSchedule = serializers.CharField(
        required=False,
        help_text="Given with `seed`: the schedule as a plain cron expression, its `H` values resolved with "
        "the seed (the same as `schedule` when it has none).",
    )
    timezone = serializers.CharField()
    fireTimes = FireTimeSerializer(many=True)


class PreviewQuerySerializer(serializers.Serializer):
    schedule = ScheduleField(
        max_length=200, required=False, help_text="A cron expression, e.g. `30 2 * * *` (or give `everySec`)."
    )
    everySec = serializers.IntegerField(
        min_value=1, max_value=MAX_EVERY_SEC, required=False, help_text="An interval in seconds, instead of `schedule`."
    )
    startAt = AwareDateTimeField(
        required=False, help_text="With `everySec`: the interval's anchor (its first fire); default `after`."
    )
    timezone = TimezoneField(required=False, default="UTC")
    count = serializers.IntegerField(min_value=1, max_value=100, required=False, default=5)
    after = AwareDateTimeField(required=False, help_text="ISO 8601 with an offset; default now.")
    seed = serializers.CharField(
        required=False,
        max_length=100,
        help_text="What resolves the schedule's hashed `H` values: a job's `jobId` previews that job's times. "
        "Required when the schedule has `H` (400 naming `seed` without it); ignored when it has none.",
    )

    def to_internal_value(self, data):
        # `count=` is a parameter given empty, not one left out: DRF would take its default, and
        # the schema (an integer) says it is refused.
        blank: dict[str, list[str]] = {
            name: ["This field may not be blank."] for name in self.fields.keys() if data.get(name, None) == ""
        }
        if blank:
            raise serializers.ValidationError(blank)
        return super().to_internal_value(data)

    def validate_schedule(self, value: str) -> str:
        # Checked with the other fields, so a bad schedule and a bad timezone are both reported.
        try:
            cron.validate(value)
        except cron.CronError as exc:
            raise serializers.ValidationError(str(exc)) from exc
        return value

    def validate(self, attrs):
        if ("schedule" in attrs) == ("everySec" in attrs):
            raise serializers.ValidationError({"schedule": ["give a schedule or everySec (an interval), one of them"]})
        if "startAt" in attrs and "everySec" not in attrs:
            raise serializers.ValidationError({"startAt": ["is only used with everySec"]})
        if "everySec" in attrs:
            return attrs
        # Without a seed there is no honest answer for an H schedule: each job has its own times.
        if "seed" not in attrs and cron.resolve(attrs["schedule"], "-") != attrs["schedule"]:
            raise serializers.ValidationError(
                {"seed": ["is required for a schedule with hashed (H) values: give a jobId to see that job's times"]}
            )
        return attrs


class SchedulePreviewApi(APIView):
    permission_classes = [AllowAny]

    @extend_schema(
        summary="Preview a schedule's next fire times",
        description="The next `count` fire times after `after` (default now) of a cron schedule in its timezone, or "
        "of an interval (`everySec`, anchored at `startAt`), each in UTC and in local time. No token needed.",
        parameters=[PreviewQuerySerializer],
        responses=SchedulePreviewSerializer,
    )
    def get(self, request):
        query = PreviewQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        zone = cron.parse_timezone(params["timezone"])
        seed = params.get("seed")
        after = params.get("after") or timezone.now()
        schedule: recurrence.Recurrence
        if "everySec" in params:
            start = params.get("startAt") or after
            schedule = recurrence.Interval(every=timedelta(seconds=params["everySec"]), start=start)
        else:
            schedule = recurrence.Cron(params["schedule"], params["timezone"], seed=seed)
        try:
            fires = schedule.fires_after(after, params["count"])
        except (ValueError, OverflowError) as exc:  # CronError, or a date past year 9999
            raise serializers.ValidationError({"everySec" if "everySec" in params else "schedule": [str(exc)]}) from exc
        body: dict[str, Any] = {
            "schedule": params.get("schedule", ""),
            "timezone": params["timezone"],
            "fireTimes": [
                {"utc": fire.strftime("%Y-%m-%dT%H:%M:%SZ"), "local": fire.astimezone(zone).isoformat()}
                for fire in fires
            ],
        }
        if isinstance(schedule, recurrence.Interval):
            body.update(everySec=params["everySec"], startAt=schedule.start.isoformat().replace("+00:00", "Z"))
        elif seed is not None:
            body["resolvedSchedule"] = cron.resolve(params["schedule"], seed)
        return Response(body)
