from django.apps import AppConfig


class TenantsConfig(AppConfig):
    name = "tenants"

    def ready(self) -> None:
        # Registers the bearer scheme with drf-spectacular (extensions register on import).
        from tenants import schema  # noqa: F401
