from django.apps import AppConfig


class DispatcherConfig(AppConfig):
    name = "dispatcher"
