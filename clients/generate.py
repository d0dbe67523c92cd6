"""`make client`: a typed Python client of the Tickwork API, generated from the live schema.

It starts the web role as production does (daphne), on a free port and a throwaway folder of its
own (the schema reads no database, so nothing of yours is touched), fetches /v1/schema, and runs
openapi-python-client on it with its default configuration into clients/python/ (README, "The
API's schema"). `--url` takes the schema of a server already running instead.

The generator is held to it: any warning (a schema it cannot read whole) fails the run, as a
non-zero exit does. tests_schema/test_generated_client.py generates the client with `generate`
and drives a scenario through it.
"""

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "clients" / "python"
BIN = Path(sys.executable).parent
# What openapi-python-client says when it left something out of the client.
WARNING = "Warning(s) encountered while generating"


class GenerationFailed(Exception):
    pass


def fetch_schema(base_url: str) -> dict:
    with urllib.request.urlopen(f"{base_url.rstrip('/')}/v1/schema?format=json", timeout=30) as answer:
        return json.load(answer)


def generate(schema: dict, output: Path) -> str:
    """Write the client of `schema` into `output` (replaced if it is there); what the generator
    said. Its default configuration, as a client developer would run it; its post-hooks format the
    client with ruff, found beside this interpreter."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "openapi.json"
        path.write_text(json.dumps(schema))
        generator = [str(BIN / "openapi-python-client"), "generate", "--overwrite"]
        run = subprocess.run(
            [*generator, "--path", str(path), "--output-path", str(output)],
            env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"},
            capture_output=True,
            text=True,
            timeout=300,
        )
    said = f"{run.stdout}\n{run.stderr}".strip()
    if run.returncode != 0 or WARNING in said:
        raise GenerationFailed(said)
    return said


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def web_role() -> Iterator[str]:
    """The web role on a free port, in the embedded configuration with a folder of its own; its
    base URL while the block runs."""
    port = _free_port()
    with tempfile.TemporaryDirectory() as var:
        env = {key: value for key, value in os.environ.items() if not key.startswith(("TICKWORK_", "DATABASE_"))}
        env.pop("CELERY_BROKER_URL", None)
        env.pop("REDIS_URL", None)
        env.update(DJANGO_SETTINGS_MODULE="scheduler_project.settings", TICKWORK_VAR_DIR=var)
        server = subprocess.Popen(
            [str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "scheduler_project.asgi:application"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    urllib.request.urlopen(f"{base}/v1/schema", timeout=5).close()
                    break
                except (urllib.error.URLError, ConnectionError):
                    if server.poll() is not None:
                        raise GenerationFailed(f"the web role exited:\n{server.stderr.read()}") from None
                    if time.monotonic() > deadline:
                        raise GenerationFailed("the web role did not answer within 60 s") from None
                    time.sleep(0.2)
            yield base
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--url",
        help="a running server's base URL, e.g. https://tickwork.example.com (default: start the web role here)",
    )
    parser.add_argument("--output", type=Path, default=OUTPUT, help=f"where the client goes (default {OUTPUT})")
    args = parser.parse_args()
    try:
        if args.url:
            schema = fetch_schema(args.url)
        else:
            with web_role() as base:
                schema = fetch_schema(base)
        generate(schema, args.output)
    except GenerationFailed as exc:
        print(f"make client: {exc}", file=sys.stderr)
        return 1
    package = next(args.output.glob("*/client.py")).parent.name
    print(f"The client is in {args.output}: `pip install {args.output}`, then `import {package}`.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
