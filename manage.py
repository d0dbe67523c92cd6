#!/usr/bin/env python
import os
import sys
from pathlib import Path

# The virtualenv that `make install` (and so `make run`) creates beside this file.
PROJECT_VENV = Path(__file__).resolve().parent / ".venv"


def _run_in_project_venv() -> None:
    """Django is not importable by this interpreter: run this command again with the project's
    virtualenv, so that the README's `python manage.py …` works from a plain shell too."""
    python = PROJECT_VENV / "bin" / "python"
    inside = Path(sys.prefix).resolve() == PROJECT_VENV.resolve()
    if python.exists() and not inside:
        os.execv(python, [str(python), *sys.argv])
    sys.exit(
        f"Django is not installed for {sys.executable}. Run `make install` in {PROJECT_VENV.parent} "
        "(it makes .venv, which this command then uses by itself), or "
        "`pip install -r requirements.txt` in an environment of your own."
    )


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")
    try:
        from django.core.management import execute_from_command_line
    except ImportError:
        _run_in_project_venv()
    from scheduler_project.app_loading import setup

    setup()  # an operator's app that fails to load stops the command here, in one line
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
