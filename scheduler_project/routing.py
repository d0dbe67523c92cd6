from django.urls import path

from dashboard.live.consumer import LiveConsumer

websocket_urlpatterns = [
    path("ws/dashboard/live/", LiveConsumer.as_asgi()),
]
