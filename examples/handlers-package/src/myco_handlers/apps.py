from django.apps import AppConfig


class MycoHandlersConfig(AppConfig):
    name = "myco_handlers"
    default_auto_field = "django.db.models.BigAutoField"
