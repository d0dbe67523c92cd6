import os

from django.core.asgi import get_asgi_application

from scheduler_project import app_loading
from telemetry import tracing

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")
tracing.setup("api")  # before the middleware is loaded: it is dropped when tracing is off
app_loading.setup(set_prefix=False)  # an operator's app that fails to load stops the server in one line
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs the app registry loaded)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from scheduler_project.routing import websocket_urlpatterns  # noqa: E402
from web.request_body import RequestBodyLimit, limit_daphne_request_bodies  # noqa: E402

limit_daphne_request_bodies()
application = ProtocolTypeRouter(
    {
        "http": RequestBodyLimit(django_asgi_app),
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
