"""What a handler's payload must fit: the base of the serializers handlers register with
`jobs.registry.register(..., payload=...)`, checked when a job is submitted or changed."""

from typing import ClassVar

from rest_framework import serializers


class StrictSerializer(serializers.Serializer):
    """Refuses fields it does not know, so a typo ('runat') is an error rather than ignored."""

    # Why a field known elsewhere is not accepted here, said instead of "unknown field".
    refused_fields: ClassVar[dict[str, str]] = {}

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    {name: [self.refused_fields.get(name, "unknown field")] for name in unknown}
                )
        return super().to_internal_value(data)
