"""A small JSON-schema checker for tool arguments (the subset the built-in tools declare).

Supports ``type`` (object, string, integer, number, boolean, array), ``properties``,
``required``, ``additionalProperties: false``, ``minLength``, ``minimum``, ``maximum`` and
``enum``. Messages name the argument, because the model reads them and should be able to fix its
call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
}


def _type_ok(expected: str, value: Any) -> bool:
    if expected in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _TYPES.get(expected, (object,)))


def schema_errors(schema: Mapping[str, Any], value: Any, where: str = "arguments") -> list[str]:
    errors: list[str] = []
    expected = schema.get("type")
    if isinstance(expected, str) and not _type_ok(expected, value):
        return [f"{where} must be of type {expected}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where} must be one of {list(schema['enum'])}")
    if isinstance(value, str) and len(value) < int(schema.get("minLength", 0)):
        errors.append(f"{where} must not be empty")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{where} must be at least {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{where} must be at most {schema['maximum']}")
    if isinstance(value, dict):
        properties: Mapping[str, Any] = schema.get("properties", {})
        errors.extend(
            f"{where}.{name} is required"
            for name in schema.get("required", ())
            if name not in value
        )
        if schema.get("additionalProperties") is False:
            errors.extend(
                f"{where}.{name} is not a known argument"
                for name in sorted(value)
                if name not in properties
            )
        for name, child in properties.items():
            if name in value:
                errors.extend(schema_errors(child, value[name], f"{where}.{name}"))
    return errors
