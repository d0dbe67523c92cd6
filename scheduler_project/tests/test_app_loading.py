"""Which apps TICKWORK_APPS and the `tickwork.apps` entry points add, and which of them an error
at start comes from (scheduler_project/app_loading.py). The roles' one-line stop is exercised
with real processes in tests_e2e/test_e2e_handler_package.py."""

import importlib
import sys
from importlib.metadata import EntryPoint

import pytest

from scheduler_project import app_loading


def _entry_points(monkeypatch, **points: str) -> None:
    found = [EntryPoint(name=name, value=value, group=app_loading.ENTRY_POINT_GROUP) for name, value in points.items()]
    monkeypatch.setattr(
        app_loading, "entry_points", lambda group: found if group == app_loading.ENTRY_POINT_GROUP else []
    )


def test_the_setting_comes_first_then_entry_points_by_name_each_once(monkeypatch):
    _entry_points(monkeypatch, zeta="zeta_handlers", alpha="alpha_handlers.apps.AlphaConfig", dup="myco")
    environ = {"TICKWORK_APPS": " myco , billing_handlers,,"}
    assert app_loading.extra_apps(environ) == [
        "myco",
        "billing_handlers",
        "alpha_handlers.apps.AlphaConfig",
        "zeta_handlers",
    ]


@pytest.mark.parametrize("off", ["0", "false", "no", "OFF"])
def test_entry_points_can_be_turned_off(monkeypatch, off):
    _entry_points(monkeypatch, zeta="zeta_handlers")
    assert app_loading.extra_apps({"TICKWORK_APPS": "myco", "TICKWORK_APP_ENTRY_POINTS": off}) == ["myco"]


def test_nothing_named_nothing_added(monkeypatch):
    _entry_points(monkeypatch)
    assert app_loading.extra_apps({}) == []


@pytest.fixture
def apps_on_path(tmp_path, monkeypatch):
    """Two packages on sys.path: one that raises in its handlers.py, one that is fine."""
    for name, handlers in {"bad_app": "raise RuntimeError('no API key')\n", "good_app": "X = 1\n"}.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
        (tmp_path / name / "handlers.py").write_text(handlers)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in ("bad_app", "bad_app.handlers", "good_app", "good_app.handlers"):
        sys.modules.pop(name, None)


def test_the_culprit_is_the_app_whose_file_raised(apps_on_path):
    with pytest.raises(RuntimeError) as raised:
        importlib.import_module("bad_app.handlers")
    assert app_loading.culprit(raised.value, ["good_app", "bad_app"]) == "bad_app"


def test_a_missing_module_names_its_app_even_as_an_app_config_path():
    error = ModuleNotFoundError("No module named 'myco_misspelt'", name="myco_misspelt")
    assert app_loading.culprit(error, ["other", "myco_misspelt.apps.MycoConfig"]) == "myco_misspelt.apps.MycoConfig"


def test_an_error_of_tickworks_own_is_no_operators_app(apps_on_path):
    try:
        raise KeyError("a bug of ours")
    except KeyError as exc:
        assert app_loading.culprit(exc, ["good_app"]) is None
