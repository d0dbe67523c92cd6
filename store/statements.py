"""How a statement runs and its rows are read, for every store: `fetch` reads raw rows as the
ORM would (aware datetimes, UUIDs), `update_sql` writes an UPDATE of executions as the ORM would
without its compiler's cost. No statement of the scheduler's own is here."""

import functools
from collections.abc import Callable, Sequence
from typing import Any, cast

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field
from django.db.models.expressions import Combinable
from django.db.models.sql import UpdateQuery

from store import tables
from store.queries import MOVED_COLUMNS
from store.replica.routing import read_alias
from store.tables import execution_field


class Statements:
    """Runs a store's statements on the default database."""

    @property
    def db(self) -> BaseDatabaseWrapper:
        return connections[DEFAULT_DB_ALIAS]

    def fetch(
        self, sql: str, params: Sequence[Any], *, read_as: Sequence[Field | None] = (), page: bool = False
    ) -> list[tuple]:
        """Run one statement and return its rows. `read_as` names the model field each leading
        column holds (None: left as it is); their values are converted as the ORM converts them:
        raw SQL on SQLite gives times as naive UTC and ids as hex strings. A `page`'s read (the
        dashboard's, the API's) goes where the request's reads go: the replica, when it may."""
        db = connections[read_alias()] if page else self.db
        rows = self._execute(db, sql, params)
        converters = _converters(db.alias, tuple(read_as))
        if not converters:
            return rows
        converted = []
        for row in rows:
            values = list(row)
            for index, col, functions in converters:
                for convert in functions:
                    values[index] = convert(values[index], col, db)
            converted.append(tuple(values))
        return converted

    def _execute(
        self, db: BaseDatabaseWrapper, sql: str, params: Sequence[Any], *, returns: bool = True
    ) -> list[tuple]:
        """Run `sql`; its rows, or none without `returns` (a statement that gives none)."""
        with db.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall() if returns else []


def _column(name: str) -> str:
    column = execution_field(name).column
    assert column is not None, name  # a concrete field always has one
    return column


@functools.cache
def moved_fields() -> list[Field]:
    return [execution_field(column) for column in MOVED_COLUMNS.split(", ")]


def update_sql(
    db: BaseDatabaseWrapper,
    where: dict[str, Any],
    values: dict[str, Any],
    *,
    extra_sets: str = "",
    extra_params: Sequence[Any] = (),
) -> tuple[str, list]:
    """UPDATE executions_execution SET `values` WHERE `where` (equalities), as `filter(**where)
    .update(**values)` would write it. Plain values go straight to SQL: the ORM's compiler was a
    third of a worker's CPU per run. An expression (F("attempt") + 1) takes the compiler's way."""
    if any(isinstance(value, Combinable) for value in values.values()):
        assert not extra_sets
        query = cast(UpdateQuery, tables.execution()._default_manager.filter(**where).query.chain(UpdateQuery))
        query.add_update_values(values)
        return query.get_compiler(db.alias).as_sql()
    sql, set_preps, where_preps = _update_shape(tuple(values), tuple(where), extra_sets)
    params = [prep(value, db) for prep, value in zip(set_preps, values.values(), strict=True)]
    params += extra_params
    params += [prep(value, db) for prep, value in zip(where_preps, where.values(), strict=True)]
    return sql, params


@functools.cache
def _update_shape(set_names: tuple[str, ...], where_names: tuple[str, ...], extra_sets: str) -> tuple[str, list, list]:
    """The SQL of an UPDATE that sets `set_names` where `where_names` are equal to parameters, and
    per parameter how to convert its value: a worker writes the same few shapes over and over, and
    building them (and looking up each field's conversion) was most of `update_sql`'s time. Both
    stores quote names alike."""
    meta, quote = tables.execution()._meta, connections[DEFAULT_DB_ALIAS].ops.quote_name
    sets = [f"{quote(_column(name))} = %s" for name in set_names]
    if extra_sets:
        sets.append(extra_sets)
    conditions = [f"{quote(_column(name))} = %s" for name in where_names]
    sql = f"UPDATE {quote(meta.db_table)} SET {', '.join(sets)} WHERE {' AND '.join(conditions)}"
    return sql, [_prep(name, save=True) for name in set_names], [_prep(name, save=False) for name in where_names]


def _prep(name: str, *, save: bool) -> Callable[[Any, BaseDatabaseWrapper], Any]:
    """How a value of field `name` becomes a parameter: what the ORM would do, except where the
    driver takes the Python value as it is (strings, numbers, aware datetimes, None)."""
    field = execution_field(name)
    kind = field.get_internal_type()
    if kind in ("CharField", "TextField", "IntegerField", "PositiveIntegerField", "BigIntegerField"):
        return _as_is
    if kind == "DateTimeField":
        return functools.partial(_datetime_prep, field)
    if save:
        return functools.partial(_save_prep, field)
    return functools.partial(_value_prep, field)


def _as_is(value: Any, db: BaseDatabaseWrapper) -> Any:
    return value


def _datetime_prep(field: Field, value: Any, db: BaseDatabaseWrapper) -> Any:
    if value is None or value.tzinfo is not None:
        return value
    return _value_prep(field, value, db)  # naive: the ORM's warning and conversion


def _save_prep(field: Field, value: Any, db: BaseDatabaseWrapper) -> Any:
    return field.get_db_prep_save(value, connection=db)


def _value_prep(field: Field, value: Any, db: BaseDatabaseWrapper) -> Any:
    return field.get_db_prep_value(value, db)


@functools.cache
def _converters(alias: str, read_as: tuple[Field | None, ...]) -> list[tuple[int, Any, list]]:
    """What `fetch` applies to the columns `read_as` names, worked out once per shape of row (a
    bearer token's lookup asks on every API request): per converted column, its index, the column
    as the ORM's compiler selects it (a foreign key as its target's type) and what it applies to a
    value read, the backend's converters then the field's."""
    db = connections[alias]
    converters = []
    for index, field in enumerate(read_as):
        if field is not None:
            col = field.get_col(field.model._meta.db_table)
            functions = [*db.ops.get_db_converters(col), *col.get_db_converters(db)]
            if functions:
                converters.append((index, col, functions))
    return converters
