from django.apps import AppConfig


class ExecutionsConfig(AppConfig):
    name = "executions"

    def ready(self) -> None:
        # A job read alone asks its executions whether it has ended (executions/standing.py).
        from executions import standing
        from jobs.models import read_ended_with

        read_ended_with(standing.read_one)
