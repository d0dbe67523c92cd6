"""The handlers this server runs, described for the people and the clients that submit jobs to
them: `GET /v1/handlers` and the dashboard's job form read the same list.

Each handler is its registration (jobs.registry): its name, pool, whether it runs atomically and
the rate limit it declares, the first paragraph of its function's docstring, and its payload as
JSON Schema. The schema is derived from the serializer the handler declares by drf-spectacular's
own field mapping, the one that writes the API's request schemas (web.schema.AutoSchema: a
StrictSerializer refuses unknown fields, `additionalProperties: false`), then written as JSON
Schema proper: OpenAPI 3.0's `nullable` becomes a `null` type. A handler without a serializer
takes any JSON object.
"""

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from drf_spectacular.plumbing import ComponentRegistry
from rest_framework.views import APIView

from jobs import registry

ANY_OBJECT: dict[str, Any] = {"type": "object"}


@dataclass(frozen=True)
class HandlerInfo:
    name: str
    pool: str
    atomic: bool
    rate_limit: str | None  # the named rate limit it declares (pools/rate_limits.py), if any
    description: str
    payload_schema: dict[str, Any]


def handler_catalog() -> list[HandlerInfo]:
    """Every registered handler, by name."""
    found = []
    for name in registry.handler_names():
        spec = registry.get(name)
        assert spec is not None  # a name the registry just listed
        found.append(
            HandlerInfo(
                name=spec.name,
                pool=spec.pool,
                atomic=spec.atomic,
                rate_limit=spec.rate_limit or None,
                description=description_of(spec.func),
                payload_schema=payload_schema(spec.payload),
            )
        )
    return found


def description_of(func: Callable[..., Any]) -> str:
    """The first paragraph of a handler's docstring, on one line; "" without one."""
    doc = inspect.getdoc(func) or ""
    return " ".join(doc.split("\n\n", 1)[0].split())


def payload_schema(serializer_class: type | None) -> dict[str, Any]:
    """The JSON Schema of a payload serializer's input; any object without one."""
    if serializer_class is None:
        return dict(ANY_OBJECT)
    from web.schema import AutoSchema  # the API's schema generator (its field extensions load with it)

    generator = AutoSchema()
    generator.registry = ComponentRegistry()
    generator.method = "POST"
    generator.path = ""
    generator.view = APIView(request=None, kwargs={}, format_kwarg=None)  # no request: a serializer's own schema
    schema = generator._map_serializer(serializer_class(), "request")
    own_doc = serializer_class.__dict__.get("__doc__")
    if own_doc:
        schema["description"] = " ".join(inspect.cleandoc(own_doc).split("\n\n", 1)[0].split())
    else:
        schema.pop("description", None)  # a base class's docstring (StrictSerializer's), not the payload's
    components = generator.registry.build({}).get("schemas", {})  # the nested serializers'
    return _json_schema(schema, components)


def _json_schema(schema: Any, components: dict[str, Any]) -> Any:
    """OpenAPI 3.0's schema object as JSON Schema: nested serializers' references inlined, and
    `nullable` said as a `null` type (or a `null` in an enum)."""
    if isinstance(schema, list):
        return [_json_schema(item, components) for item in schema]
    if not isinstance(schema, dict):
        return schema
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
        return _json_schema(components[ref.rsplit("/", 1)[1]], components)
    converted = {key: _json_schema(value, components) for key, value in schema.items() if key != "nullable"}
    if schema.get("nullable"):
        if isinstance(converted.get("type"), str):
            converted["type"] = [converted["type"], "null"]
        if "enum" in converted and None not in converted["enum"]:
            converted["enum"] = [*converted["enum"], None]
        for choice in ("oneOf", "anyOf"):
            if choice in converted:
                converted[choice] = [*converted[choice], {"type": "null"}]
    return converted
