"""The answer of POST /v1/jobs/{id}/resume?dryRun=true: what resuming would run and skip."""

from rest_framework import serializers

from jobs.models import MisfirePolicy
from jobs.states import JobState
from readmodels.selectors import ResumePreview
from web.api.job_fields import StoredChoiceField
from web.rest import GivenIfEmpty


class _QueryBoolean(GivenIfEmpty, serializers.BooleanField):
    """A boolean in a query string: absent is the default, but present and empty (`?dryRun=`) is
    no boolean (DRF, reading form input, takes it as absent and would resume for real)."""


class ResumeQuerySerializer(serializers.Serializer):
    dryRun = _QueryBoolean(
        required=False,
        default=False,
        help_text="true: change nothing and answer what resume would run and skip under the job's "
        "misfirePolicy (a 200 with the dry run's shape; a job that is not paused answers 409 as resume does).",
    )


class ResumePreviewSerializer(serializers.Serializer):
    """Built from readmodels.selectors.ResumePreview."""

    LISTED = 100

    dryRun = serializers.SerializerMethodField(help_text="Always true: nothing was changed.")
    jobId = serializers.CharField(source="job.pk")
    state = StoredChoiceField(JobState.choices, source="job.state", help_text="The job's state, unchanged (PAUSED).")
    misfirePolicy = StoredChoiceField(MisfirePolicy.values, source="policy")
    misfireGraceSec = serializers.SerializerMethodField(
        help_text="Under SKIP, a fire claimed more than this late is skipped."
    )
    catchupWindowSec = serializers.IntegerField(
        source="job.catchup_window_sec",
        allow_null=True,
        help_text="The job's catch-up window: a fire more than this old when claimed is skipped, under every "
        "misfirePolicy (null: none).",
    )
    at = serializers.DateTimeField(help_text="The moment the dry run is for: the database's now.")
    wouldRun = serializers.ListField(
        child=serializers.DateTimeField(),
        source="catch_up.runs",
        help_text=f"The fires (scheduled times) that would run on resume, in order; at most {LISTED}.",
    )
    wouldRunCount = serializers.IntegerField(source="catch_up.run_count")
    wouldSkip = serializers.ListField(
        child=serializers.DateTimeField(),
        source="catch_up.skipped",
        help_text=f"The fires due by now that would not run (cancelled, or never materialised), in order; at "
        f"most {LISTED}.",
    )
    wouldSkipCount = serializers.IntegerField(source="catch_up.skip_count")
    countsCapped = serializers.BooleanField(
        source="catch_up.capped", help_text="More fires were due than were counted: the counts are lower bounds."
    )
    nextFireAt = serializers.DateTimeField(
        source="catch_up.next_fire", allow_null=True, help_text="The fire left pending once caught up."
    )

    def get_dryRun(self, preview: ResumePreview) -> bool:
        return True

    def get_misfireGraceSec(self, preview: ResumePreview) -> int:
        return int(preview.misfire_grace.total_seconds())
