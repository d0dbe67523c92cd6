"""web/collector.py: the collector is off while any holder runs, and as it was once the last ends."""

import gc
import threading

import pytest

from web.collector import collector_held


@pytest.fixture(autouse=True)
def _collector_restored():
    was = gc.isenabled()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_held_off_inside_and_on_again_after_even_when_the_request_raises():
    gc.enable()
    with pytest.raises(RuntimeError), collector_held():
        assert not gc.isenabled()
        raise RuntimeError("the view failed")
    assert gc.isenabled()


def test_left_off_after_when_it_was_off_before():
    gc.disable()
    with collector_held():
        pass
    assert not gc.isenabled()


def test_two_threads_overlapping_keep_it_off_until_the_last_one_ends():
    gc.enable()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with collector_held():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second():
        first_in.wait(5)
        with collector_held():
            second_in.set()
            first_out.wait(5)
            seen["after the first left"] = gc.isenabled()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen == {"after the first left": False}
    assert gc.isenabled()
