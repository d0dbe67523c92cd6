"""The Host header: the health check answers whatever it names, and a request whose host is not
one of ALLOWED_HOSTS is logged as one line.

A load balancer's probe names the backend by its address (`Host: 10.0.0.5:8000`), which is no host
the site is served as. Django answered it 400 DisallowedHost, with a traceback in the log, so the
balancer took every backend out of service. The health check builds no URL from the host and sets
no cookie, so answering it for any host gives a forged Host nothing to poison; every other path is
still held to ALLOWED_HOSTS (README, "Production deployment")."""

import logging

HEALTH_PATH = "/v1/health"  # scheduler_project/urls.py's `health`


class HealthAnyHostMiddleware:
    """Serves GET /v1/health before CommonMiddleware, which checks the Host header."""

    def __init__(self, get_response) -> None:
        # Imported here: settings.LOGGING imports this module (the filter below) before the apps
        # are loaded, and the view's module imports models.
        from web.api.health import HealthApi

        self.get_response = get_response
        self.health = HealthApi.as_view()

    def __call__(self, request):
        if request.path_info != HEALTH_PATH:
            return self.get_response(request)
        response = self.health(request)
        response.render()  # the handler renders a view's response; this one never reaches it
        return response


class RefusedHostAsOneLine(logging.Filter):
    """On the logger `django.security.DisallowedHost`: the message ("Invalid HTTP_HOST header:
    '10.0.0.5:8000'. You may need to add '10.0.0.5' to ALLOWED_HOSTS.") as a warning, without the
    traceback Django attaches. A scanner or a misaddressed client is the client's error, not the
    server's: a page of stack per request buried the log and tripped alerts on ERROR lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info = None
        record.exc_text = None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True
