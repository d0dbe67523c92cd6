"""insert_new's statements on PostgreSQL: a model's INSERTs, one row's and a batch's as arrays."""

import functools
import operator
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from django.db import connections
from django.db.models import DateField, DateTimeField, Field, JSONField, Model, TimeField


class Insert(NamedTuple):
    read: Callable[[Model], tuple]  # a row's values, column by column
    stamped: list[Field]  # the fields a save fills with the time (auto_now, auto_now_add)
    filled: list[Field]  # the other fields a save fills (a pre_save of their own)
    json: list[Field | None]  # per column, its field if its values need JSON's adapter
    one: str  # a row's values
    many: str  # an array per column (of one element: that value in every row), then the count


# pre_save methods that only read the attribute, unless the field fills itself (auto_now…).
_READ_ONLY_PRE_SAVE = {Field.pre_save, DateField.pre_save, DateTimeField.pre_save, TimeField.pre_save}


@functools.cache
def insert_of(model: type[Model], alias: str) -> Insert:
    """A model's INSERTs for insert_new, written once per process: writing them for each call
    (quoting every column, asking every field its type) was a good part of a create's CPU."""
    db = connections[alias]
    meta = model._meta
    # An auto-numbered key (a job version's) is left to the database's sequence.
    fields = [field for field in meta.concrete_fields if field is not meta.auto_field]
    table = db.ops.quote_name(meta.db_table)
    columns = ", ".join(db.ops.quote_name(str(field.column)) for field in fields)  # concrete: never None
    values = ", ".join(f"%s::{field.db_type(db)}" for field in fields)
    # The arrays go in binary: psycopg writes an array's text form in Python, escaping each
    # element, which for a batch cost more than the database's inserts.
    arrays = ", ".join(f"%s::{field.db_type(db)}[] AS c{i}" for i, field in enumerate(fields))
    # A column of one element is that value for each of the n rows. Unnested, not subscripted:
    # taking element i of an array of texts walks it from the start, n² for the batch.
    columns_of = ", ".join(
        f"CASE WHEN cardinality(a.c{i}) = 1 THEN array_fill(a.c{i}[1], ARRAY[a.n]) ELSE a.c{i} END"
        for i in range(len(fields))
    )
    stamped = [field for field in fields if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False)]
    return Insert(
        read=operator.attrgetter(*(field.attname for field in fields)),
        stamped=stamped,
        filled=[f for f in fields if f not in stamped and type(f).pre_save not in _READ_ONLY_PRE_SAVE],
        json=[field if isinstance(field, JSONField) else None for field in fields],
        one=f"INSERT INTO {table} ({columns}) VALUES ({values})",
        many=f"INSERT INTO {table} ({columns}) SELECT u.* FROM (SELECT {arrays}, %s::integer AS n) AS a,"
        f" unnest({columns_of}) AS u",
    )


def json_column(field: Field, column: Sequence[Any], db) -> list:
    """A JSON column's values for a batch's array, each as the field adapts it; or one value when
    every row holds the same JSON (a batch's `{}` payloads, its executions' null results), which
    the statement gives every row, as it does any column's one element. Each value cost psycopg
    a `json.dumps` and the database a parse: 5,000 of them in a 1,000-job bulk create. The same
    JSON, not only equal values: {"a": 1} == {"a": True} == {"a": 1.0} in Python."""
    first = column[0]
    if column.count(first) == len(column) and (shape := _json_shape(first)) is not None:
        if all(value is first or _json_shape(value) == shape for value in column):
            return [field.get_db_prep_save(first, db)]
    return [field.get_db_prep_save(value, db) for value in column]


def _json_shape(value: Any) -> tuple | None:
    """`value` with the type of each of its parts: equal only for the same JSON (None: not
    looked into, a value other than JSON's own types)."""
    kind = type(value)
    if kind is dict:
        items = []
        for key, item in value.items():
            shape = _json_shape(item)
            if shape is None or type(key) is not str:
                return None
            items.append((key, shape))
        return (dict, tuple(items))
    if kind is list:
        shapes = tuple(map(_json_shape, value))
        return None if None in shapes else (list, shapes)
    if kind in (str, int, bool, type(None)):
        return (kind, value)
    if kind is float:
        return (kind, repr(value))  # -0.0 is 0.0, yet other JSON
    return None
