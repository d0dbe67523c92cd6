"""The web role's HTTP side as a WSGI application, for gunicorn (README, "Production deployment"):
the API, the dashboard's pages, the admin and /metrics. The dashboard's live views are WebSockets,
which only the ASGI application (scheduler_project/asgi.py, under daphne) serves.

Why both: Django runs the synchronous views of the API under ASGI in a thread per request, and on
this project's benchmark machine that cost ~2 ms of CPU a request, four times what the whole of a
request through gunicorn costs (bench/README.md, "Creation through HTTP")."""

import os

from django.core.wsgi import get_wsgi_application

from scheduler_project import app_loading
from telemetry import tracing

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")
tracing.setup("api")  # before the middleware is loaded: it is dropped when tracing is off
app_loading.setup(set_prefix=False)  # an operator's app that fails to load stops the server in one line

from web.proxy_headers import ForwardedFor  # noqa: E402  (reads settings)
from web.request_body import WSGIRequestBodyLimit  # noqa: E402

application = ForwardedFor.wrap(WSGIRequestBodyLimit(get_wsgi_application()))
