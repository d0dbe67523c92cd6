"""What a handler's payload must fit: the base of the serializers handlers register with
`jobs.registry.register(..., payload=...)`, checked when a job is submitted or changed."""

from collections.abc import Callable
from datetime import datetime
from functools import cached_property
from typing import Any, ClassVar

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers
from rest_framework.fields import SkipField, empty, get_error_detail

# What DRF does with a field absent from the input: these methods of the field, DRF's own.
_ABSENT_HOOKS = ("get_value", "validate_empty_values", "run_validation", "get_default")


class StrictSerializer(serializers.Serializer):
    """Refuses fields it does not know, so a typo ('runat') is an error rather than ignored."""

    # Why a field known elsewhere is not accepted here, said instead of "unknown field".
    refused_fields: ClassVar[dict[str, str]] = {}

    # A batch's memo of its fields' values (validated_job's `memo`), or None: each body checked alone.
    batch_memo: dict[tuple, Any] | None = None

    def to_internal_value(self, data):
        names, plan = self._plan
        if isinstance(data, dict) and not data.keys() <= names:
            refused = {name: [self.refused_fields.get(name, "unknown field")] for name in sorted(data.keys() - names)}
            raise serializers.ValidationError(refused)
        if type(data) is not dict:  # not a plain JSON object (a form's QueryDict, a list): DRF's own loop
            return super().to_internal_value(data)
        # DRF's Serializer.to_internal_value, planned once per serializer, and without the fields
        # that are absent, optional and without a default: DRF runs each of those to catch the
        # SkipField it raises, which for a job's body (4 fields given of 17) was a third of its
        # validation (web/tests/test_strict_serializer.py holds it to DRF's own).
        validated: dict[str, Any] = {}
        errors: dict[str, Any] = {}
        memo = self.batch_memo
        for field, validate_method, skipped_if_absent in plan:
            if skipped_if_absent and field.field_name not in data:
                continue
            try:
                raw = field.get_value(data)
                key = _memo_key(str(field.field_name), raw) if memo is not None else None
                if memo is not None and key is not None and key in memo:
                    value = _fresh(memo[key])
                else:
                    value = field.run_validation(raw)
                    if validate_method is not None:
                        value = validate_method(value)
                    if memo is not None and key is not None and _shareable(value):
                        memo[key] = _fresh(value)
            except serializers.ValidationError as exc:
                errors[str(field.field_name)] = exc.detail  # a bound field has its name
            except DjangoValidationError as exc:
                errors[str(field.field_name)] = get_error_detail(exc)
            except SkipField:
                pass
            else:
                self.set_value(validated, field.source_attrs, value)
        if errors:
            raise serializers.ValidationError(errors)
        return validated

    def run_validators(self, value):
        # DRF's Serializer.run_validators, which looks through every field for read-only ones
        # with a default on each call (and each nested serializer's), to add their defaults to
        # what its validators see; these serializers have none. That search was a tenth to a
        # fifth of a bulk create's validation (1,000 items: 21-24 against 25-35 ms of CPU).
        if isinstance(value, dict) and not self._read_only_defaulted:
            return serializers.Field.run_validators(self, dict(value))
        return super().run_validators(value)

    @cached_property
    def _read_only_defaulted(self) -> bool:
        """Whether a field is read-only with a default (DRF's _read_only_defaults' own test)."""
        return any(
            field.read_only and field.default is not empty and field.source != "*" and "." not in (field.source or "")
            for field in self.fields.values()
        )

    @cached_property
    def _plan(self) -> tuple[frozenset[str], list[tuple[serializers.Field, Callable | None, bool]]]:
        """The field names, and per writable field: its validate_<name> method, and whether DRF
        would skip it when absent (optional, no default, DRF's own handling of an absent value)."""
        plan = [
            (
                field,
                getattr(self, f"validate_{field.field_name}", None),
                not field.required
                and field.default is empty
                and all(getattr(type(field), hook).__module__.startswith("rest_framework.") for hook in _ABSENT_HOOKS),
            )
            for field in self._writable_fields
        ]
        return frozenset(self.fields.keys()), plan


# A batch's items mostly repeat their fields' values (one target, one type, one runAt for a
# thousand jobs): a field's validation depends on its value alone (the serializer validates a
# create, with no instance; the registry and the zone do not change within a request), so within
# a batch a value already found valid is that field's value again, without its validators (the
# target's nested serializer, the time's parse), which were half of a bulk create's validation.
# Only values whose key cannot confuse two JSON values (a float's -0.0 is 0.0) and results that
# cannot be shared by mistake (immutable, or a flat dict handed out as a copy). An error is not
# remembered: each bad item is checked, and named, as before.
_KEYED = frozenset({str, int, bool, type(None)})
_SHARED = frozenset({str, int, bool, type(None), datetime})


def _memo_key(name: str, raw: Any) -> tuple | None:
    kind = type(raw)
    if kind in _KEYED:
        return (name, kind, raw)
    if kind is dict and all(type(value) in _KEYED for value in raw.values()):
        return (name, dict, tuple((key, type(value), value) for key, value in raw.items()))
    return None


def _shareable(value: Any) -> bool:
    if type(value) in _SHARED:
        return True
    return isinstance(value, dict) and all(type(item) in _SHARED for item in value.values())


def _fresh(value: Any) -> Any:
    return value.copy() if isinstance(value, dict) else value
