from django.apps import AppConfig


class ExecutionsConfig(AppConfig):
    name = "executions"
