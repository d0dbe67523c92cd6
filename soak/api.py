"""The soak's client of the REST API."""

import contextlib
import json
import time
import urllib.error
import urllib.request

# --- The API ----------------------------------------------------------------------------------------


class Api:
    """The tenants' HTTP clients (standard library). Creates carry an Idempotency-Key, so a retry
    after a lost answer cannot create a job twice."""

    ATTEMPTS = 10

    def __init__(self, base: str) -> None:
        self.base = base
        self.deadline = float("inf")  # monotonic time after which a failed call is not repeated
        self.errors: list[str] = []
        self.unavailable = 0  # answers 503: the web says the database is out of reach for now

    def call(self, method: str, path: str, token: str, body: dict | None = None, key: str = "") -> tuple[int, dict]:
        """The answer's status and JSON body; 0 when there was none. Every call the soak makes may
        be repeated (creates carry a key, a cancel asked twice is not an error): a 503 is retried
        when its Retry-After says, and so is any other 5xx or a failed connection, which is also
        reported, since the web role is not faulted."""
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        if key:
            headers["Idempotency-Key"] = key
        data = json.dumps(body).encode() if body is not None else None
        for attempt in range(1, self.ATTEMPTS + 1):
            request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
            retry_after = 0.5 * attempt
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    return response.status, json.loads(response.read() or b"{}")
            except urllib.error.HTTPError as exc:
                text = exc.read().decode(errors="replace")
                if exc.code < 500:
                    return exc.code, json.loads(text) if text.startswith("{") else {"detail": text}
                if exc.code == 503:
                    self.unavailable += 1
                    with contextlib.suppress(TypeError, ValueError):
                        retry_after = min(5.0, float(exc.headers.get("Retry-After")))
                else:
                    self.errors.append(f"{method} {path}: {exc.code} {' '.join(text.split())[:200]} (try {attempt})")
            except (OSError, ValueError) as exc:
                self.errors.append(f"{method} {path}: {exc.__class__.__name__}: {exc} (try {attempt})")
            if time.monotonic() > self.deadline:
                break
            time.sleep(retry_after)
        self.errors.append(f"{method} {path}: no answer after {attempt} tries")
        return 0, {}
