"""A team's own Django apps (handler packages), enabled without a fork.

Two ways to name one, both read when the settings load (README, "Your own handlers"):

- `TICKWORK_APPS`: comma-separated app modules (or AppConfig paths), appended to INSTALLED_APPS;
- the entry-point group `tickwork.apps`: an installed distribution that declares
  `[project.entry-points."tickwork.apps"] myco = "myco_handlers"` is enabled with no setting
  (`TICKWORK_APP_ENTRY_POINTS=0` turns that off, for an operator who wants only what is named).

Their `handlers.py` is discovered as the built-in apps' is, and their migrations run with
`migrate`. An app that fails to load stops the process at start with one line naming the app
and the error, never a traceback among a half-started fleet's logs: every role (manage.py's
commands, the Celery worker, the ASGI and WSGI applications) starts Django through `setup`.
"""

import importlib.util
import sys
from collections.abc import Mapping
from importlib.metadata import entry_points
from pathlib import Path
from types import TracebackType

ENTRY_POINT_GROUP = "tickwork.apps"
# The exit status of a role stopped by an app that failed to load (as a usage error's).
EXIT_STATUS = 2


def extra_apps(environ: Mapping[str, str]) -> list[str]:
    """The apps to add to INSTALLED_APPS: TICKWORK_APPS's in their order, then the entry
    points' by name; each once."""
    names = [name.strip() for name in environ.get("TICKWORK_APPS", "").split(",") if name.strip()]
    if environ.get("TICKWORK_APP_ENTRY_POINTS", "1").strip().lower() not in {"0", "false", "no", "off"}:
        names += [point.value.strip() for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name)]
    return list(dict.fromkeys(names))


def setup(*, set_prefix: bool = True, apps_only: bool = False) -> None:
    """django.setup(); when one of the extra apps fails to load, write one line naming it and
    the error to stderr and exit with EXIT_STATUS. A failure of Tickwork's own apps is not
    an operator's app and keeps its traceback. `apps_only`: load the apps and leave logging
    alone (the Celery worker, whose own Django setup configures it in its order)."""
    import django
    from django.apps import apps
    from django.conf import settings

    try:
        if apps_only:
            apps.populate(settings.INSTALLED_APPS)
        else:
            django.setup(set_prefix=set_prefix)
    except Exception as exc:
        app = culprit(exc, settings.TICKWORK_EXTRA_APPS)
        if app is None:
            raise
        sys.stderr.write(f"tickwork: the app {app!r} failed to load: {type(exc).__name__}: {_one_line(exc)}\n")
        sys.stderr.flush()
        raise SystemExit(EXIT_STATUS) from None


def culprit(exc: BaseException, apps: list[str]) -> str | None:
    """Which of `apps` `exc` came from: the app whose module is missing, or the one whose files
    the traceback passes through (its innermost frame wins)."""
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        for app in apps:
            top = _module_of(app)
            if exc.name == top or top.startswith(f"{exc.name}."):
                return app
    folders = {app: folder for app in apps if (folder := _folder_of(app)) is not None}
    found = None
    for filename in _filenames(exc.__traceback__):
        for app, folder in folders.items():
            if Path(filename).resolve().is_relative_to(folder):
                found = app
    if found is None and isinstance(exc, SyntaxError) and exc.filename:  # the file that did not parse
        found = next((app for app, f in folders.items() if Path(exc.filename).resolve().is_relative_to(f)), None)
    return found


def _module_of(app: str) -> str:
    """An entry's module: "myco_handlers.apps.MycoConfig" names the package myco_handlers."""
    parts = app.split(".")
    return ".".join(parts[:-2]) if len(parts) > 2 and parts[-1][:1].isupper() else app


def _folder_of(app: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(_module_of(app).split(".")[0])
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    origin = Path(spec.origin).resolve()
    return origin.parent if spec.submodule_search_locations else origin


def _filenames(tb: TracebackType | None) -> list[str]:
    names = []
    while tb is not None:
        names.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    return names


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or "(no message)"
