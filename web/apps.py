from django.apps import AppConfig


class WebConfig(AppConfig):
    name = "web"

    def ready(self) -> None:
        # Registers the bearer scheme with drf-spectacular (extensions register on import).
        from web import authentication_schema  # noqa: F401
