"""The production deployment the README lays out (deploy/): the systemd units' commands, run from /
as systemd runs them (its working directory when none is set), with the example environment
file, on PostgreSQL; the example environment file against the settings the README documents; and
one control socket per gunicorn instance."""

import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from django.conf import settings
from django.db import connection

from scheduler_project.tests.conftest import free_port
from tenants.services import tenant_create, token_create
from testing.harness import database_url, wait_for

ROOT = Path(settings.BASE_DIR)
DEPLOY = ROOT / "deploy"
UNITS = {path.name: path for path in sorted((DEPLOY / "systemd").glob("*.service"))}
ENV_EXAMPLE = DEPLOY / "tickwork.env.example"
# Where the README and the units put the checkout, and the environment file.
CHECKOUT = "/opt/tickwork"
ENV_FILE = "/etc/tickwork/tickwork.env"
ROLES = [
    "tickwork-web.service",
    "tickwork-live.service",
    "tickwork-dispatcher.service",
    "tickwork-sweeper.service",
    "tickwork-alerter.service",
    "tickwork-worker@.service",
]
ASSIGNMENT = re.compile(r"^(#?)([A-Z][A-Z0-9_]*)=(.*)$")


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=value lines as systemd's EnvironmentFile= reads them: comments and blank lines skipped,
    a value's surrounding double quotes removed."""
    env = {}
    for line in path.read_text().splitlines():
        match = ASSIGNMENT.match(line)
        if match and not match[1]:
            value = match[3]
            env[match[2]] = value[1:-1] if len(value) > 1 and value[0] == value[-1] == '"' else value
    return env


def service_section(unit: Path) -> dict[str, list[str]]:
    """The [Service] section's settings, each key with its values in order."""
    section, found = None, {}
    for line in unit.read_text().splitlines():
        if line.startswith("["):
            section = line.strip()
        elif section == "[Service]" and "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            found.setdefault(key.strip(), []).append(value.strip())
    return found


def command(unit: str, *, instance: str = "default") -> list[str]:
    """The unit's ExecStart as systemd would run it on this machine: the checkout and its virtualenv
    where this test runs, %i the instance (a pool), %H this host."""
    [line] = service_section(UNITS[unit])["ExecStart"]
    line = line.replace(f"{CHECKOUT}/.venv", sys.prefix).replace(CHECKOUT, str(ROOT))
    line = line.replace("%i", instance).replace("%H", socket.gethostname()).replace("%%", "%")
    assert "%" not in line and "$" not in line, f"{unit}: a specifier or variable this test does not expand: {line}"
    return shlex.split(line)


def documented_settings() -> set[str]:
    """The variables of the README's configuration tables (section "Configuration")."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("\n## Configuration\n") : readme.index("\n## Production deployment\n")]
    names = set()
    for cell in re.findall(r"^\| (.+?) \|", section, re.M):
        names |= {name for name in re.findall(r"`([^`]+)`", cell) if re.fullmatch(r"[A-Z][A-Z0-9_]+", name)}
    return names


def test_the_example_environment_shows_every_documented_setting_each_with_a_comment():
    """deploy/tickwork.env.example sets or shows (commented, at its default) every variable of the
    README's configuration tables, each under a line of its own saying what it is."""
    lines = ENV_EXAMPLE.read_text().splitlines()
    shown = {}
    for number, line in enumerate(lines):
        if match := ASSIGNMENT.match(line):
            above = lines[number - 1]
            assert above.startswith("# ") and not ASSIGNMENT.match(above[2:]), f"{match[2]} has no comment above it"
            shown[match[2]] = line
    documented = documented_settings()
    assert len(documented) > 60  # the tables were found
    assert documented - set(shown) == set()


def test_the_example_environment_reads_the_same_in_sh_as_in_systemd(tmp_path):
    """The README runs `manage.py` by hand with `set -a; . tickwork.env`: sh reads the file as
    systemd's EnvironmentFile= does."""
    env = read_env_file(ENV_EXAMPLE)
    shell = subprocess.run(
        ["sh", "-c", f"set -a; . {ENV_EXAMPLE}; env -0"], env={"PATH": os.defpath}, capture_output=True, check=True
    )
    read_by_sh = dict(item.split("=", 1) for item in shell.stdout.decode().split("\0") if "=" in item)
    assert {key: read_by_sh.get(key) for key in env} == env


def test_the_readmes_tls_block_is_in_the_example_environment():
    """Each line of the README's block of production variables is in the example as it is."""
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- production-env -->\s*```ini\n(.*?)```", readme, re.S)[1]
    example = read_env_file(ENV_EXAMPLE)
    for line in block.strip().splitlines():
        key, value = line.split("=", 1)
        if key != "DJANGO_SECRET_KEY":  # a hint in the README, to be filled in the file
            assert example.get(key) == value, key


def test_check_deploy_is_clean_with_the_example_environment_from_root(tmp_path):
    """`manage.py check --deploy --fail-level WARNING` with the example's values (and a key), run
    from / by absolute path, as systemd would."""
    env = {
        "PATH": os.defpath,
        **read_env_file(ENV_EXAMPLE),
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "TICKWORK_VAR_DIR": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "check", "--deploy", "--fail-level", "WARNING"],
        cwd="/",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_an_empty_secret_key_stops_a_role_at_start(tmp_path):
    """The example leaves DJANGO_SECRET_KEY empty for the operator to fill in: a role started
    with it as it is stops with one reason instead of running on an empty key."""
    env = {"PATH": os.defpath, "DJANGO_SECRET_KEY": "", "TICKWORK_VAR_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "check"], cwd="/", env=env, capture_output=True, text=True
    )
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY is empty" in result.stderr


def test_a_relative_var_dir_is_the_checkouts_whatever_the_working_directory(tmp_path):
    """Roles started in different directories (systemd's is /) share TICKWORK_VAR_DIR: a relative
    one is taken from the checkout, not from where the role was started."""
    relative = f"var/test-relative-{os.getpid()}"
    try:
        result = subprocess.run(
            [sys.executable, "-c", "from django.conf import settings; print(settings.VAR_DIR)"],
            cwd=tmp_path,
            env={
                "PATH": os.defpath,
                "PYTHONPATH": str(ROOT),
                "DJANGO_SETTINGS_MODULE": "scheduler_project.settings",
                "TICKWORK_VAR_DIR": relative,
            },
            capture_output=True,
            text=True,
            check=True,
        )
        assert result.stdout.strip() == str(ROOT / relative)
        assert not (tmp_path / "var").exists()
    finally:
        shutil.rmtree(ROOT / relative, ignore_errors=True)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_the_units_are_valid_systemd_units(tmp_path):
    """systemd's own check of every unit, with the paths of this machine in place of /opt/tickwork
    (it checks that each command exists) and this user in place of tickwork."""
    user = subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout.strip()
    group = subprocess.run(["id", "-gn"], capture_output=True, text=True, check=True).stdout.strip()
    for name, unit in UNITS.items():
        text = unit.read_text().replace(f"{CHECKOUT}/.venv", sys.prefix).replace(CHECKOUT, str(ROOT))
        text = text.replace(ENV_FILE, str(ENV_EXAMPLE)).replace("User=tickwork", f"User={user}")
        (tmp_path / name.replace("@.", "@default.")).write_text(text.replace("Group=tickwork", f"Group={group}"))
    result = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *sorted(map(str, tmp_path.iterdir()))],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0 and result.stdout + result.stderr == "", result.stdout + result.stderr


def test_every_unit_runs_from_the_checkout_with_the_environment_file():
    for name, unit in UNITS.items():
        service = service_section(unit)
        assert service["WorkingDirectory"] == [CHECKOUT], name
        assert service["EnvironmentFile"] == [ENV_FILE], name
        assert service["ExecStart"][0].startswith(f"{CHECKOUT}/.venv/bin/"), name
    assert set(ROLES) | {"tickwork-migrate.service"} == set(UNITS)


class Role:
    def __init__(self, name: str, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.name, self.log_path = name, log
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                argv, cwd="/", env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.process.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue


def _healthy(base: str, host: str):
    response = requests.get(f"{base}/v1/health", headers={"Host": host}, timeout=15)
    if response.status_code != 200:
        return None
    body = response.json()
    roles = body["roles"]
    seen = all(roles[role]["processes"] for role in ("dispatcher", "sweeper", "alerter"))
    return body if body["status"] == "ok" and seen and roles["workers"]["pools"]["default"]["workers"] else None


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_every_role_starts_from_its_unit_in_root_and_the_fleet_is_healthy(tmp_path):
    """Each unit's ExecStart, run from / with the example environment file (its services pointed at
    the test database and a Redis database of the test's own): the migrations run, every role
    starts, gunicorn's /v1/health answers the load balancer's probe (which names the backend's
    address, no allowed host) 200 with the dispatcher, sweeper, alerter and a worker of pool
    default seen, daphne answers it too, a job created through the proxy's headers runs, Django
    serves /static/, and another path for the backend's address is a 400 logged in one line."""
    if connection.vendor != "postgresql":
        pytest.skip("production runs on PostgreSQL")
    import redis

    redis_url = f"{os.environ.get('TICKWORK_TEST_REDIS_URL', 'redis://127.0.0.1:6379').rstrip('/')}/"
    redis_url += os.environ.get("TICKWORK_TEST_REDIS_DB", "3")
    redis.Redis.from_url(redis_url).flushdb()
    web, live = free_port(), free_port()
    env_file = tmp_path / "tickwork.env"
    env_file.write_text(
        ENV_EXAMPLE.read_text()
        + "\n# The test's own services.\n"
        + "".join(
            f"{key}={value}\n"
            for key, value in {
                "DATABASE_URL": database_url(),
                "CELERY_BROKER_URL": redis_url,
                "REDIS_URL": redis_url,
                "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
                "TICKWORK_VAR_DIR": str(tmp_path / "var"),
                "TICKWORK_WEB_BIND": f"127.0.0.1:{web}",
                "EMAIL_HOST": "",
            }.items()
        )
    )
    (tmp_path / "home").mkdir()
    # systemd's environment for a service: PATH, HOME of its user, and its EnvironmentFile.
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path / "home"), **read_env_file(env_file)}

    migrate = subprocess.run(command("tickwork-migrate.service"), cwd="/", env=env, capture_output=True, text=True)
    assert migrate.returncode == 0, migrate.stdout + migrate.stderr

    roles = []
    try:
        for unit in ROLES:
            argv = command(unit)
            if unit == "tickwork-live.service":  # its address, as the README's command gives it
                argv[argv.index("-b") + 1], argv[argv.index("-p") + 1] = "127.0.0.1", str(live)
            roles.append(Role(unit, argv, env, tmp_path / f"{unit}.log"))

        def up():
            for role in roles:
                assert role.process.poll() is None, f"{role.name} exited:\n{role.log()[-3000:]}"
            try:
                return _healthy(f"http://127.0.0.1:{web}", f"127.0.0.1:{web}")
            except requests.RequestException:
                return None

        health = wait_for(up, timeout=180, interval=1, what="every role to be up and /v1/health ok")
        assert health["database"] == health["broker"] == "ok"
        assert requests.get(f"http://127.0.0.1:{live}/v1/health", timeout=15).status_code == 200

        # Through the TLS proxy: the site's host and X-Forwarded-Proto (else SSL redirect answers 301).
        proxied = {"Host": "tickwork.example.com", "X-Forwarded-Proto": "https"}
        _, token = token_create(tenant=tenant_create(slug="acme"))
        auth = {**proxied, "Authorization": f"Bearer {token}"}
        job = {"name": "deployed", "type": "DELAYED", "delaySec": 0, "target": {"handler": "noop"}}
        created = requests.post(f"http://127.0.0.1:{web}/v1/jobs", json=job, headers=auth, timeout=30)
        assert created.status_code == 201, created.text
        executions = f"http://127.0.0.1:{web}/v1/executions?jobId={created.json()['jobId']}"

        def succeeded():
            rows = requests.get(executions, headers=auth, timeout=30).json()["results"]
            return rows and rows[0]["state"] == "SUCCEEDED"

        wait_for(succeeded, timeout=60, interval=0.5, what="the job to run on the unit's worker")
        css = requests.get(f"http://127.0.0.1:{web}/static/dashboard/app.css", headers=proxied, timeout=30)
        assert css.status_code == 200 and "text/css" in css.headers["Content-Type"]

        refused = requests.get(f"http://127.0.0.1:{web}/v1/", headers={"Host": "10.0.0.5:8000"}, timeout=30)
        assert refused.status_code == 400
        gunicorn = roles[0]
        wait_for(lambda: "Invalid HTTP_HOST header: '10.0.0.5:8000'" in gunicorn.log(), timeout=10, what="the log")
        assert "Traceback" not in gunicorn.log()
    finally:
        for role in roles:
            role.stop()
        if any(role.process.returncode not in (0, -signal.SIGTERM) for role in roles):
            print("\n".join(f"----- {role.name} -----\n{role.log()[-3000:]}" for role in roles))


@pytest.mark.e2e
def test_two_gunicorns_on_one_host_keep_their_own_control_sockets(web_server, tmp_path):
    """gunicorn's control socket defaulted to $HOME/.gunicorn/gunicorn.ctl for every instance of
    a user: the second took it over from the first. Each now has its own in TICKWORK_VAR_DIR,
    named by its address, answering for its own master; stopping one leaves the other's."""
    from gunicorn.ctl.client import ControlClient, ControlClientError

    home = tmp_path / "home"
    home.mkdir()
    first = web_server("gunicorn", HOME=str(home), XDG_RUNTIME_DIR="")
    second = web_server("gunicorn", HOME=str(home), XDG_RUNTIME_DIR="")
    sockets = {server: tmp_path / f"gunicorn-127.0.0.1-{server.port}.ctl" for server in (first, second)}

    def master_pid(path: Path) -> int | None:
        try:
            with ControlClient(str(path), timeout=10) as client:
                return client.send_command("show stats")["pid"]
        except ControlClientError:  # not there (yet)
            return None

    for server, path in sockets.items():
        wait_for(lambda path=path: master_pid(path), timeout=30, interval=0.2, what=f"{path.name}")
        assert master_pid(path) == server.process.pid
    assert not (home / ".gunicorn").exists()

    second.stop()
    assert master_pid(sockets[first]) == first.process.pid
