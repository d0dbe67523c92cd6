"""Unsaved model instances made in bulk: a job, its first execution and its version 1, a
thousand of each for a bulk submission, and every API write's audit row.

`Model(**values)` walks every field of the model for every instance (its default, its
descriptor, the keyword arguments left), which was a quarter of a `POST /v1/jobs/bulk`'s CPU
(profiled); `new_row` makes the same instance from the defaults worked out once per model.
A property test holds it to Django's constructor (jobs/tests/test_rows.py)."""

import functools
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

from django.db.models import Model
from django.db.models.base import ModelState

M = TypeVar("M", bound=Model)


class _Defaults(NamedTuple):
    constant: dict[str, Any]  # attname → the value every new instance starts with
    made: list[tuple[str, Callable[[], Any]]]  # attname → what makes each instance's own (uuid4, dict)
    relations: dict[str, str]  # a foreign key's name → its attname (job → job_id)


@functools.cache
def _defaults_of(model: type[Model]) -> _Defaults:
    constant: dict[str, Any] = {}
    made: list[tuple[str, Callable[[], Any]]] = []
    relations: dict[str, str] = {}
    for field in model._meta.concrete_fields:
        if field.is_relation:
            relations[field.name] = field.attname
        if field.has_default() and callable(field.default):
            made.append((field.attname, field.default))
        else:
            constant[field.attname] = field.get_default()
    return _Defaults(constant, made, relations)


def new_row(model: type[M], values: dict[str, Any]) -> M:
    """`model(**values)`, unsaved: `values` by field name or attname (a foreign key by its object,
    kept as the instance's cached relation, or by its id). Only concrete fields: no properties,
    no reverse relations."""
    defaults = _defaults_of(model)
    row = model.__new__(model)
    row._state = ModelState()
    state = row.__dict__
    state.update(defaults.constant)
    for attname, make in defaults.made:
        if attname not in values:
            state[attname] = make()
    for name, value in values.items():
        column = defaults.relations.get(name)
        if column is None:
            state[name] = value
        else:  # the related object: its id in the column, itself in the cache, as the descriptor does
            state[column] = None if value is None else value.pk
            row._state.fields_cache[name] = value
    return row
