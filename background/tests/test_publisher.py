"""The publisher: what reaches the broker, in what order, and that a real worker runs it.

Uses a real Redis (TICKWORK_TEST_PUBLISHER_REDIS_DB, default 4, flushed around each test) and,
for the round trip, a real Celery worker process against the test database.
"""

import base64
import json
import os
import uuid
from datetime import timedelta

import pytest
from celery import Celery, signals
from django.utils import timezone

from background.publisher import (
    BATCH_TASK_NAME,
    TASK_NAME,
    CeleryPublisher,
    Dispatch,
    InMemoryPublisher,
    batches,
    broker_priority,
)
from dispatcher import dispatcher
from executions.models import Execution
from testing.harness import Live, database_url, wait_for
from testing.steps import capacity

REDIS_DB = int(os.environ.get("TICKWORK_TEST_PUBLISHER_REDIS_DB", "4"))


def unreachable(reason: str) -> None:
    """A broker that is not there skips a developer's run, but fails CI's, where Redis and RabbitMQ
    are part of the machine (.ci/run checks them first)."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture
def broker_url():
    import redis

    url = f"{os.environ.get('TICKWORK_TEST_REDIS_URL', 'redis://127.0.0.1:6379').rstrip('/')}/{REDIS_DB}"
    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    except redis.RedisError as exc:
        unreachable(f"publisher tests need Redis at {url}: {exc}")
    yield url
    client.flushdb()


@pytest.fixture
def redis_client(broker_url):
    import redis

    return redis.Redis.from_url(broker_url)


def celery_app(broker_url: str) -> Celery:
    """An app configured as the project's (Django settings, CELERY_ namespace) on `broker_url`."""
    app = Celery("tickwork-publisher-tests", set_as_current=False)
    app.config_from_object("django.conf:settings", namespace="CELERY")
    app.conf.broker_url = broker_url
    app.conf.broker_transport_options = {}
    return app


def without_ids(raw: bytes) -> dict:
    """A stored message with its per-message ids blanked, after checking they are consistent."""
    message = json.loads(raw)
    headers, properties = message["headers"], message["properties"]
    assert headers["id"] == headers["root_id"] == properties["correlation_id"]
    assert properties["delivery_tag"] and properties["delivery_tag"] != headers["id"]
    headers["id"] = headers["root_id"] = properties["correlation_id"] = properties["delivery_tag"] = "…"
    return message


def body_of(raw: bytes) -> list:
    return json.loads(base64.b64decode(json.loads(raw)["body"]))


@pytest.mark.integration
def test_redis_messages_are_what_send_task_writes(broker_url, redis_client):
    """On Redis, a published message is byte for byte what `send_task` stores, but for its ids."""
    app = celery_app(broker_url)
    execution_id = str(uuid.uuid4())  # as the dispatcher sends it: a UUID's text
    app.send_task(
        TASK_NAME, args=(execution_id, 7), queue="tickwork.default", routing_key="tickwork.default", ignore_result=True
    )
    # HIGH: message priority 0, as send_task's default (other priorities: the test below).
    CeleryPublisher(app=app).publish([Dispatch(execution_id=execution_id, lease_token=7, pool="default", priority=0)])

    theirs, ours = redis_client.rpop("tickwork.default"), redis_client.rpop("tickwork.default")
    assert redis_client.llen("tickwork.default") == 0
    assert without_ids(ours) == without_ids(theirs)
    assert body_of(ours) == [[execution_id, 7], {}, {"callbacks": None, "errbacks": None, "chain": None, "chord": None}]
    assert json.loads(ours)["headers"]["id"] != json.loads(theirs)["headers"]["id"]
    assert ids_blanked(ours) == ids_blanked(theirs)  # the text too, not only what it parses to


def ids_blanked(raw: bytes) -> bytes:
    message = json.loads(raw)
    for each in (message["headers"]["id"], message["properties"]["delivery_tag"]):
        raw = raw.replace(each.encode(), b"<id>")
    return raw


@pytest.mark.integration
@pytest.mark.parametrize("priority", [0, 1, 2])
def test_a_priority_goes_where_send_task_puts_that_message_priority(broker_url, redis_client, priority):
    """HIGH, NORMAL and LOW are message priorities 0, 3 and 6 on Redis: byte for byte what
    `send_task(priority=…)` stores, in the list of that priority step."""
    app = celery_app(broker_url)
    on_broker = broker_priority(priority, transport="redis")
    app.send_task(
        TASK_NAME, args=("e-1", 7), queue="tickwork.default", routing_key="tickwork.default", ignore_result=True,
        priority=on_broker,
    )  # fmt: skip
    CeleryPublisher(app=app).publish([Dispatch(execution_id="e-1", lease_token=7, pool="default", priority=priority)])

    key = "tickwork.default" + (f"\x06\x16{on_broker}" if on_broker else "")
    theirs, ours = redis_client.rpop(key), redis_client.rpop(key)
    assert redis_client.dbsize() == 0
    assert without_ids(ours) == without_ids(theirs)
    assert json.loads(ours)["properties"]["priority"] == on_broker


@pytest.mark.integration
def test_a_worker_takes_high_before_a_low_backlog_already_on_the_broker(broker_url):
    """The claim orders only what is still PENDING; once a pool's backlog is on the broker, a
    HIGH published after it is still taken first (kombu's own consumer, as a worker uses it)."""
    app = celery_app(broker_url)
    publisher = CeleryPublisher(app=app)
    publisher.publish([Dispatch(execution_id=f"low-{i}", lease_token=1, pool="default", priority=2) for i in range(5)])
    publisher.publish([Dispatch(execution_id="normal", lease_token=1, pool="default", priority=1)])
    publisher.publish([Dispatch(execution_id="high", lease_token=1, pool="default", priority=0)])

    taken = []
    with app.connection_for_read() as conn, conn.SimpleQueue("tickwork.default") as queue:
        for _ in range(7):
            message = queue.get(timeout=5)
            taken.append(message.payload[0][0])
            message.ack()
    assert taken == ["high", "normal"] + [f"low-{i}" for i in range(5)]


def test_other_brokers_get_priorities_their_way():
    """AMQP serves the highest number first (queues declared with x-max-priority 2)."""
    assert [broker_priority(p, transport="amqp") for p in (0, 1, 2)] == [2, 1, 0]
    assert [broker_priority(p, transport="redis") for p in (0, 1, 2)] == [0, 3, 6]


@pytest.mark.integration
def test_redis_batch_is_pipelined_in_order_to_each_pool_queue(broker_url, redis_client, monkeypatch):
    """A batch is pushed without `send_task`, to each pool's queue, and consumed in the order given."""
    app = celery_app(broker_url)
    monkeypatch.setattr(app, "send_task", lambda *a, **k: pytest.fail("the Redis path must not call send_task"))
    dispatches = [Dispatch(execution_id=f"e-{i}", lease_token=i, pool="ab"[i % 2], priority=0) for i in range(2500)]

    CeleryPublisher(app=app).publish(dispatches)

    for pool in "ab":
        consumed = []
        while raw := redis_client.rpop(f"tickwork.{pool}"):  # workers take from the tail
            consumed.append(tuple(body_of(raw)[0]))
        assert consumed == [(d.execution_id, d.lease_token) for d in dispatches if d.pool == pool]


@pytest.mark.integration
def test_nothing_to_publish_touches_no_broker(broker_url, redis_client):
    CeleryPublisher(app=celery_app(broker_url)).publish([])

    assert redis_client.dbsize() == 0


@pytest.mark.integration
def test_a_publish_signal_receiver_makes_it_use_send_task(broker_url, redis_client):
    """Something hooked into `send_task` (tracing, say) still sees every message."""
    seen = []

    def receiver(sender=None, headers=None, **kwargs):
        seen.append((sender, headers["argsrepr"]))

    signals.before_task_publish.connect(receiver)
    try:
        CeleryPublisher(app=celery_app(broker_url)).publish(
            [Dispatch(execution_id=f"e-{i}", lease_token=1, pool="default", priority=0) for i in range(3)]
        )
    finally:
        signals.before_task_publish.disconnect(receiver)

    assert seen == [(TASK_NAME, f"('e-{i}', 1)") for i in range(3)]
    assert redis_client.llen("tickwork.default") == 3


def test_other_brokers_get_each_message_through_send_task():
    """A broker other than Redis (here kombu's in-memory transport) gets ordinary Celery messages."""
    app = celery_app("memory://")
    dispatches = [Dispatch(execution_id=f"e-{i}", lease_token=i, pool="default", priority=1) for i in range(3)]

    CeleryPublisher(app=app).publish(dispatches)

    received = []
    with app.connection_for_read() as conn, conn.SimpleQueue("tickwork.default") as queue:
        for _ in dispatches:
            message = queue.get(timeout=5)
            received.append((message.headers["task"], tuple(message.payload[0])))
            message.ack()
    assert received == [(TASK_NAME, (d.execution_id, d.lease_token)) for d in dispatches]


def test_in_memory_publisher_keeps_what_it_was_given():
    publisher = InMemoryPublisher()
    batch = [Dispatch(execution_id="e-1", lease_token=1, pool="default", priority=0)]

    publisher.publish(batch)
    publisher.publish(batch)

    assert publisher.sent == batch * 2


@pytest.mark.e2e
def test_a_real_worker_runs_what_the_publisher_sent(transactional_db, broker_url, tmp_path, tenant, make_job):
    """Messages pushed by the Redis path are taken, run and recorded by an unmodified worker."""
    now = timezone.now()
    jobs = [make_job(tenant, run_at=now - timedelta(seconds=1), payload={"n": n}, now=now) for n in range(5)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TICKWORK_", "CELERY_", "DJANGO_", "DATABASE_"))}
    env.pop("REDIS_URL", None)
    env.update(
        DJANGO_SETTINGS_MODULE="scheduler_project.settings",
        DATABASE_URL=database_url(),
        CELERY_BROKER_URL=broker_url,
        TICKWORK_VAR_DIR=str(tmp_path / "var"),
        TICKWORK_LOG_LEVEL="INFO",
    )
    live = Live(tmp_dir=tmp_path, env=env, broker_url=broker_url)
    try:
        live.worker(concurrency=1)
        capacity(timezone.now(), slots=len(jobs))  # all of them admitted at once, to the one worker's queue
        result = dispatcher.run_once(now=timezone.now(), publisher=CeleryPublisher(app=celery_app(broker_url)))
        assert result.published == len(jobs)

        wait_for(
            lambda: Execution.objects.filter(job__in=jobs, state="SUCCEEDED").count() == len(jobs),
            timeout=60,
            what="the worker to run the published executions",
        )
    except BaseException:
        print(live.tails())
        raise
    finally:
        survivors = live.stop_all()
    assert not survivors
    assert sorted(e.result["n"] for e in Execution.objects.filter(job__in=jobs)) == list(range(5))


@pytest.mark.integration
def test_on_rabbitmq_a_worker_takes_high_before_a_low_backlog():
    """RabbitMQ (TICKWORK_TEST_AMQP_URL, default the local server): the pool's queue is declared
    with x-max-priority, and a HIGH published after a LOW backlog is delivered first."""
    import kombu.exceptions

    app = celery_app(os.environ.get("TICKWORK_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//"))
    app.conf.task_queue_max_priority = 2  # as settings.py sets it for an AMQP broker
    queue = app.amqp.queues["tickwork.priority-test"]
    try:
        with app.connection_for_write() as conn:
            queue.bind(conn.default_channel).delete()
    except (OSError, kombu.exceptions.OperationalError) as exc:
        unreachable(f"needs RabbitMQ: {exc}")
    publisher = CeleryPublisher(app=app)
    try:
        publisher.publish([Dispatch(f"low-{i}", 1, "priority-test", priority=2) for i in range(3)])
        publisher.publish([Dispatch("high", 1, "priority-test", priority=0)])

        taken = []
        with app.connection_for_read() as conn, conn.SimpleQueue(queue) as simple:
            for _ in range(4):
                message = simple.get(timeout=5)
                taken.append(message.payload[0][0])
                message.ack()
        assert taken == ["high", "low-0", "low-1", "low-2"]
    finally:
        with app.connection_for_write() as conn:
            queue.bind(conn.default_channel).delete()


def _d(execution_id: str, pool: str = "default", priority: int = 1) -> Dispatch:
    return Dispatch(execution_id=execution_id, lease_token=1, pool=pool, priority=priority)


def test_a_pools_runs_beyond_its_slots_are_batched_in_order():
    """n runs of a pool of s slots make messages of ceil(n / s) runs, at most `most`, each of
    runs that follow each other in the order given; a pool of unknown slots, a message per run."""
    runs = [_d(f"e-{i}") for i in range(10)]
    assert [[d.execution_id for d in m] for m in batches(runs, slots={"default": 4}, most=8)] == [
        ["e-0", "e-1", "e-2"], ["e-3", "e-4", "e-5"], ["e-6", "e-7", "e-8"], ["e-9"]
    ]  # fmt: skip
    assert [len(m) for m in batches(runs, slots={"default": 1}, most=4)] == [4, 4, 2]
    assert [len(m) for m in batches(runs, slots={"default": 20}, most=8)] == [1] * 10
    assert [len(m) for m in batches(runs, slots={}, most=8)] == [1] * 10


def test_a_batch_holds_one_pool_and_one_priority():
    """Runs of other pools or priorities go in messages of their own, each keeping its order."""
    runs = [_d("h1", priority=0), _d("n1"), _d("h2", priority=0), _d("b1", pool="b"), _d("n2"), _d("b2", pool="b")]
    messages = batches(runs, slots={"default": 1, "b": 1}, most=8)
    assert [[d.execution_id for d in m] for m in messages] == [["h1", "h2"], ["n1", "n2"], ["b1", "b2"]]


def test_without_live_slots_the_publisher_sends_a_message_per_run(settings):
    """Batching is the dispatcher's (LiveSlots); a publisher without it, or TICKWORK_MESSAGE_BATCH 1,
    sends each run alone."""
    runs = [_d(f"e-{i}") for i in range(4)]
    assert [len(m) for m in CeleryPublisher(app=object())._messages(runs)] == [1] * 4
    settings.TICKWORK_MESSAGE_BATCH = 1
    assert [len(m) for m in CeleryPublisher(app=object(), slots=lambda: {"default": 1})._messages(runs)] == [1] * 4


@pytest.mark.integration
def test_a_batch_message_is_what_send_task_writes_and_a_hand_back_goes_first(broker_url, redis_client):
    """A batch is byte for byte the message `send_task` stores for tickwork.run_executions with its
    runs, pool and priority (but for ids); published at the front, it is the next one taken."""
    app = celery_app(broker_url)
    runs = [_d(str(uuid.uuid4())) for _ in range(3)]
    args = ([[d.execution_id, d.lease_token] for d in runs], "default", 1)
    on_broker = broker_priority(1, transport="redis")
    app.send_task(
        BATCH_TASK_NAME, args=args, queue="tickwork.default", routing_key="tickwork.default", ignore_result=True,
        priority=on_broker,
    )  # fmt: skip
    publisher = CeleryPublisher(app=app, slots=lambda: {"default": 1})
    publisher.publish(runs)
    key = f"tickwork.default\x06\x16{on_broker}"
    theirs, ours = redis_client.rpop(key), redis_client.rpop(key)
    assert without_ids(ours) == without_ids(theirs)
    assert ids_blanked(ours) == ids_blanked(theirs)
    assert body_of(ours)[0] == json.loads(json.dumps(args))

    CeleryPublisher(app=app).publish([_d("queued-1"), _d("queued-2")])
    publisher.publish_messages([[_d("handed-back")]], front=True)
    taken = [body_of(redis_client.rpop(key))[0][0] for _ in range(3)]
    assert taken == ["handed-back", "queued-1", "queued-2"]
