"""The web role of the soak: the project's ASGI application, with the soak's handler registered
so that jobs naming it are accepted."""

import importlib

from scheduler_project.asgi import application

importlib.import_module("soak.handlers")  # after Django is set up, which the line above does

__all__ = ["application"]
