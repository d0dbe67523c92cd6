"""Static files straight from the apps' static folders, for installs with no web server in front
of the ASGI server (the standalone mode). A proxy or CDN in front serves them instead."""

from django.http import HttpRequest
from django.http.response import HttpResponseBase


def static_asset(request: HttpRequest, path: str) -> HttpResponseBase:
    from django.contrib.staticfiles.views import serve

    response = serve(request, path, insecure=True)
    response.headers["Cache-Control"] = "public, max-age=300"
    return response
