"""The fork server starts a role as a fresh interpreter would (testing/zygote.py): its argv,
environment and working directory, a session of its own, its output where asked, atexit and its
exit status as usual; and what a fork cannot give goes to a fresh interpreter."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from testing import zygote

ROLE = """
import atexit, os, sys
atexit.register(lambda: print("atexit ran", flush=True))
print("argv", sys.argv[1:], "cwd", os.getcwd(), "env", os.environ.get("ZYGOTE_PROBE"), "env size", len(os.environ))
print("session", os.getsid(0) == os.getpid(), "path0", sys.path[0])
print("unbuffered line", end="\\n")
if sys.argv[1:] == ["wait"]:
    import time
    time.sleep(60)
sys.exit(int(sys.argv[1]) if sys.argv[1:] and sys.argv[1].isdigit() else 0)
"""


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "role.py"
    path.write_text(textwrap.dedent(ROLE))
    return path


def _env(**extra: str) -> dict[str, str]:
    """A role's environment: the interpreter's settings as this process has them (or it would not
    be forked), and one of its own."""
    interpreter = {k: v for k, v in os.environ.items() if k.startswith(zygote.INTERPRETER_KEYS)}
    return {**interpreter, "ZYGOTE_PROBE": "seen", **extra}


def _start(script, tmp_path, *args: str, **env: str):
    with open(tmp_path / "out.log", "wb") as log:
        return zygote.spawn([sys.executable, str(script), *args], cwd=tmp_path, env=_env(**env), stdout=log)


def test_a_forked_role_runs_with_its_own_argv_environment_directory_and_session(script, tmp_path):
    role = _start(script, tmp_path, "3")
    assert isinstance(role, zygote.Forked)
    assert role.wait(timeout=30) == 3
    out = (tmp_path / "out.log").read_text()
    assert f"argv ['3'] cwd {tmp_path} env seen env size {len(_env())}" in out
    assert f"session True path0 {tmp_path}" in out
    assert out.rstrip().endswith("atexit ran")


def test_a_module_run_with_dash_m_sees_its_arguments(tmp_path):
    (tmp_path / "in.json").write_text('{"b": 1, "a": 2}')
    with open(tmp_path / "out.log", "wb") as log:
        role = zygote.spawn(
            [sys.executable, "-m", "json.tool", "--sort-keys", str(tmp_path / "in.json")],
            cwd=tmp_path,
            env=_env(),
            stdout=log,
        )
    assert role.wait(timeout=30) == 0
    assert (tmp_path / "out.log").read_text().index('"a"') < (tmp_path / "out.log").read_text().index('"b"')


def test_unbuffered_output_is_in_the_log_while_the_role_runs_and_a_signal_is_its_status(script, tmp_path):
    role = _start(script, tmp_path, "wait", PYTHONUNBUFFERED="1")
    deadline = time.monotonic() + 30
    while "unbuffered line" not in (tmp_path / "out.log").read_text():
        assert time.monotonic() < deadline, "the role's line never reached its log"
        time.sleep(0.02)
    assert role.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        role.wait(timeout=0.1)
    os.killpg(role.pid, signal.SIGKILL)  # its session: the group is the role
    assert role.wait(timeout=30) == -signal.SIGKILL
    assert role.poll() == -signal.SIGKILL


def test_what_a_fork_cannot_give_starts_a_fresh_interpreter(script, tmp_path, monkeypatch):
    assert zygote.forkable([sys.executable, "manage.py", "run_dispatcher"], _env())
    assert zygote.forkable([sys.executable, "-m", "celery", "worker"], _env(PYTHONUNBUFFERED="1"))
    assert not zygote.forkable([sys.executable, "manage.py"], _env(LD_PRELOAD="libfaketime.so.1"))
    assert not zygote.forkable([sys.executable, "-c", "pass"], _env())
    assert not zygote.forkable(["/bin/true"], _env())
    role = _start(script, tmp_path, "4", PYTHONHASHSEED="7")
    assert isinstance(role, subprocess.Popen)
    assert role.wait(timeout=30) == 4
    monkeypatch.setenv("TICKWORK_TEST_FORK_SERVER", "0")
    assert not zygote.forkable([sys.executable, "manage.py"], _env())
