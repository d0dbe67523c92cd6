"""The README's `python manage.py …` commands, run as written from a plain shell."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(settings.BASE_DIR)


def _system_python() -> str:
    """An interpreter outside the project's virtualenv that cannot import Django."""
    for name in ("python3", "python"):
        for path in os.environ.get("PATH", "").split(os.pathsep):
            candidate = Path(path) / name
            if not candidate.exists() or Path(path).resolve() == Path(sys.prefix, "bin").resolve():
                continue
            probe = subprocess.run([candidate, "-c", "import django"], capture_output=True, env=_plain_env())
            if probe.returncode != 0:
                return str(candidate)
    pytest.skip("no python without Django on PATH")


def _plain_env() -> dict[str, str]:
    """The environment of a shell that did not activate the virtualenv."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if ".venv" not in p)
    return env


def test_papercut_manage_py_runs_with_a_python_outside_the_virtualenv():
    """`python3 manage.py help` with an interpreter that has no Django runs the command in the
    project's .venv instead of failing with "No module named 'django'"."""
    assert (ROOT / ".venv" / "bin" / "python").exists(), "the project's virtualenv is .venv (make install)"
    result = subprocess.run(
        [_system_python(), "manage.py", "help", "create_tenant"],
        cwd=ROOT,
        env=_plain_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "create_tenant" in result.stdout


def test_papercut_manage_py_without_a_virtualenv_says_how_to_install(tmp_path):
    """Without .venv, the command names what to run instead of a bare ImportError."""
    shutil.copy(ROOT / "manage.py", tmp_path / "manage.py")
    result = subprocess.run(
        [_system_python(), "manage.py", "help"], cwd=tmp_path, env=_plain_env(), capture_output=True, text=True
    )
    assert result.returncode != 0
    assert "make install" in result.stderr
    assert "Traceback" not in result.stderr
