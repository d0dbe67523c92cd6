from django.apps import AppConfig


class StandaloneConfig(AppConfig):
    name = "standalone"
