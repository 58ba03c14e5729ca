"""Config validation with one clear line per problem (jsonschema underneath)."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import yaml

from .errors import ConfigError


def _where(path) -> str:
    return ".".join(str(p) for p in path) or "(top level)"


def validate(config: dict, schema_path) -> None:
    schema = yaml.safe_load(Path(schema_path).read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(e.path), list(map(str, e.path))))
    if not errors:
        return
    e = errors[0]
    if e.validator == "additionalProperties":
        extra = sorted(set(e.instance) - set(e.schema.get("properties", {})))
        allowed = ", ".join(e.schema.get("properties", {}))
        what = f"unknown key {', '.join(map(repr, extra))}" + (f" (allowed: {allowed})" if allowed else "")
    elif e.validator == "required":
        what = e.message
    else:
        what = f"{e.instance!r} is not valid: {e.message}"
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    raise ConfigError(f"config: {_where(e.path)}: {what}{more}")
