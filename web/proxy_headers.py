"""The client's address behind a proxy, for the WSGI side (scheduler_project/wsgi.py): the login
throttle and the audit log read REMOTE_ADDR, which under gunicorn is the proxy's own address.
daphne's `--proxy-headers` does the same for the ASGI side."""

from django.conf import settings


class ForwardedFor:
    """WSGI middleware: REMOTE_ADDR from the last address of X-Forwarded-For, the one the proxy in
    front appended (the ones before it are whatever the client sent, and prove nothing)."""

    def __init__(self, app) -> None:
        self.app = app

    @classmethod
    def wrap(cls, app):
        """`app` behind this middleware when TICKWORK_PROXY_HEADERS is on; else `app` itself."""
        return cls(app) if settings.TICKWORK_PROXY_HEADERS else app

    def __call__(self, environ, start_response):
        forwarded = environ.get("HTTP_X_FORWARDED_FOR", "")
        if last := forwarded.rpartition(",")[2].strip():
            environ = {**environ, "REMOTE_ADDR": last}
        return self.app(environ, start_response)
