"""The `celery` handler's payload, checked at submission: bridges are the operator's, so a job
can name only one that TICKWORK_CELERY_BRIDGES configures, and waits only where results can be
read. The sends and waits themselves run against real processes in
tests_e2e/test_e2e_celery_bridge.py."""

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from worker import celery_bridge

BRIDGES = {
    "legacy": {"broker": "amqp://guest:guest@127.0.0.1:5672//", "resultBackend": "redis://127.0.0.1:6379/7"},
    "fire-and-forget": {"broker": "amqp://guest:guest@127.0.0.1:5672//"},
}


@pytest.fixture
def bridges(settings):
    settings.TICKWORK_CELERY_BRIDGES = BRIDGES


def _post(api, payload):
    body = {
        "name": "bridged",
        "type": "ONCE",
        "runAt": timezone.now().isoformat(),
        "target": {"handler": "celery"},
        "payload": payload,
    }
    return api.post("/v1/jobs", body, format="json")


def test_a_job_naming_a_configured_bridge_and_a_task_is_accepted(api, bridges):
    payload = {"bridge": "legacy", "task": "billing.tasks.charge", "args": [1, "a"], "kwargs": {"x": None}}
    response = _post(api, {**payload, "queue": "billing", "wait": True, "waitTimeoutSec": 30})
    assert response.status_code == 201, response.json()


@pytest.mark.parametrize(
    ("payload", "errors"),
    [
        (
            {"bridge": "elsewhere", "task": "t"},
            {"bridge": ['unknown bridge "elsewhere"; known: fire-and-forget, legacy']},
        ),
        (
            {"bridge": "fire-and-forget", "task": "t", "wait": True},
            {"wait": ['bridge "fire-and-forget" has no resultBackend, so its results cannot be waited for']},
        ),
        ({"bridge": "legacy", "task": "t", "waitTimeoutSec": 5}, {"waitTimeoutSec": ["is only used with wait: true"]}),
        (
            {"bridge": "legacy", "task": "os.system; rm"},
            {"task": ["a task name: dotted identifiers, e.g. billing.tasks.charge"]},
        ),
        ({"bridge": "legacy", "task": "t", "queue": "a b"}, {"queue": ["letters, digits and . _ - : only"]}),
        ({"bridge": "legacy", "task": "t", "broker": "amqp://evil//"}, {"broker": ["unknown field"]}),
        ({"bridge": "legacy"}, {"task": ["This field is required."]}),
    ],
)
def test_a_bad_payload_is_a_400_naming_the_field(api, bridges, payload, errors):
    """Never a broker URL from a job: an unknown key is refused like any other."""
    response = _post(api, payload)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid"
    assert response.json()["payload"] == errors


def test_with_no_bridge_configured_the_error_says_so(api, settings):
    settings.TICKWORK_CELERY_BRIDGES = {}
    response = _post(api, {"bridge": "legacy", "task": "t"})
    assert response.json()["payload"] == {
        "bridge": ['unknown bridge "legacy"; known: none is configured (TICKWORK_CELERY_BRIDGES)']
    }


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({"b": {"resultBackend": "redis://"}}, 'TICKWORK_CELERY_BRIDGES["b"] needs a "broker" URL'),
        ({"b": "amqp://"}, 'TICKWORK_CELERY_BRIDGES["b"] needs a "broker" URL'),
        ({"b": {"broker": "amqp://", "backend": "x"}}, 'TICKWORK_CELERY_BRIDGES["b"] has unknown keys: backend'),
    ],
)
def test_a_misconfigured_bridge_is_named(settings, conf, message):
    settings.TICKWORK_CELERY_BRIDGES = conf
    with pytest.raises(ImproperlyConfigured, match=message.replace("[", r"\[")):
        celery_bridge.bridges()


def test_the_task_id_names_the_execution_and_attempt():
    assert celery_bridge.task_id("0f0e", 3) == "tickwork-0f0e-3"


def test_the_link_takes_the_bridges_urls_not_the_environments(settings, monkeypatch):
    """Celery reads CELERY_BROKER_URL and CELERY_RESULT_BACKEND before an app's own settings; a
    worker's environment names Tickwork's broker there, which a bridge must never publish to."""
    monkeypatch.setenv("CELERY_BROKER_URL", "redis://127.0.0.1:6379/3")
    monkeypatch.setenv("CELERY_RESULT_BACKEND", "redis://127.0.0.1:6379/3")
    link = celery_bridge.link_of(
        celery_bridge.Bridge(name="x", broker=BRIDGES["legacy"]["broker"], result_backend="redis://127.0.0.1:6379/7")
    )
    assert link.connection.as_uri().startswith("amqp://guest:**@127.0.0.1:5672/")
    assert link.backend.connparams["db"] == 7
