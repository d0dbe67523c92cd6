import pytest

from testing.webhooks import start_receiver


@pytest.fixture
def receiver(settings):
    """A webhook receiver on 127.0.0.1; private addresses allowed, as the test's receiver is one."""
    settings.TICKWORK_HTTP_ALLOW_PRIVATE = True
    found = start_receiver()
    yield found
    found.stop()
