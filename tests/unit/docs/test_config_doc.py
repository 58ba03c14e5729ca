"""docs/config.md documents every key of workflow/schemas/config.schema.yaml:
its key table is generated from the schema, and this test fails when the two
drift apart. Regenerate after a schema change with

    .venv/bin/python tests/unit/docs/test_config_doc.py --write
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
DOC = REPO / "docs" / "config.md"
BEGIN = "<!-- begin keys: generated from workflow/schemas/config.schema.yaml by tests/unit/docs/test_config_doc.py --write -->"
END = "<!-- end keys -->"


def _type(spec: dict) -> str:
    if "enum" in spec:
        return "one of " + ", ".join(f"`{v}`" if v != "" else '`""`' for v in spec["enum"])
    if "anyOf" in spec:
        return " or ".join(_type(s) for s in spec["anyOf"])
    t = spec.get("type", "")
    if t == "array":
        return f"list of {_type(spec.get('items', {}))}"
    if t == "string" and "pattern" in spec:
        return f"string matching `{spec['pattern']}`"
    if t == "object" and "additionalProperties" in spec and isinstance(spec["additionalProperties"], dict):
        return "mapping: name -> entry"
    if "minimum" in spec:
        return f"{t} >= {spec['minimum']}"
    return t or "any"


def rows(spec: dict, prefix: str = "", required=()) -> list[tuple[str, str, str, str]]:
    """(key path, type, required/default, description) for every key, depth first."""
    out = []
    for name, sub in (spec.get("properties") or {}).items():
        path = f"{prefix}{name}"
        need = "required" if name in required else (
            f"default `{sub['default']}`" if "default" in sub else "optional")
        out.append((path, _type(sub), need, sub.get("description", "")))
        out += rows(sub, path + ".", sub.get("required", ()))
        extra = sub.get("additionalProperties")
        if isinstance(extra, dict) and extra.get("properties"):
            out += rows(extra, f"{path}.<name>.", extra.get("required", ()))
    return out


def render(schema: dict) -> str:
    lines = [BEGIN, "", "| key | type | required / default | what it is |", "|---|---|---|---|"]
    for path, typ, need, desc in rows(schema, "", schema.get("required", ())):
        lines.append(f"| `{path}` | {typ} | {need} | {desc} |")
    return "\n".join(lines + ["", END])


def generated_part(text: str) -> str:
    m = re.search(re.escape(BEGIN) + ".*?" + re.escape(END), text, re.S)
    return m.group(0) if m else ""


def test_doc_key_table_is_generated_from_the_schema():
    schema = yaml.safe_load(SCHEMA.read_text(encoding="utf-8"))
    assert generated_part(DOC.read_text(encoding="utf-8")) == render(schema), (
        "docs/config.md is out of date with the schema: run `.venv/bin/python tests/unit/docs/test_config_doc.py --write`")


def test_every_schema_key_is_documented():
    schema = yaml.safe_load(SCHEMA.read_text(encoding="utf-8"))
    doc = DOC.read_text(encoding="utf-8")
    paths = [p for p, *_ in rows(schema, "", schema.get("required", ()))]
    assert len(paths) > 30  # the walk reaches the recipe fields
    for must in ("data_dir", "datasets.<name>.sha256", "variants.<name>.recipe.window"):
        assert must in paths
    assert [p for p in paths if f"`{p}`" not in doc] == []


def test_render_names_what_the_schema_allows():
    spec = {"type": "object", "required": ["a"], "properties": {
        "a": {"type": "string", "description": "first"},
        "b": {"type": "object", "additionalProperties": {"type": "object", "required": ["c"],
                                                        "properties": {"c": {"enum": ["x", ""]}}}}}}
    text = render(spec)
    assert "| `a` | string | required | first |" in text
    assert '| `b.<name>.c` | one of `x`, `""` | required |  |' in text


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    text = DOC.read_text(encoding="utf-8")
    new = render(yaml.safe_load(SCHEMA.read_text(encoding="utf-8")))
    DOC.write_text(text.replace(generated_part(text), new) if generated_part(text) else text + "\n" + new + "\n",
                   encoding="utf-8")
    print(f"wrote {DOC}")


def test_the_shipped_config_names_the_published_data_files():
    """config.yaml's byte counts (and sha256) of the published files are those the report identifies them by."""
    import yaml

    from memobench.evaluation.published import DATA_FILES, identify_file

    datasets = yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))["datasets"]
    for ds, key in (("longmemeval_s", "longmemeval_s-original"), ("longmemeval_m", "longmemeval_m-original"),
                    ("locomo10", "locomo10")):
        assert datasets[ds]["bytes"] == DATA_FILES[key]["bytes"], ds
        assert identify_file(datasets[ds]["bytes"], datasets[ds].get("sha256"))["known"] == key, ds


def test_a_file_is_known_by_sha256_where_both_are_known_else_by_size():
    from memobench.evaluation.published import DATA_FILES, identify_file

    loc = DATA_FILES["locomo10"]
    assert identify_file(loc["bytes"], loc["sha256"])["matched_by"] == "sha256"
    assert identify_file(loc["bytes"], None)["matched_by"] == "bytes"  # its sha256 not computed here
    assert identify_file(loc["bytes"], "0" * 64)["known"] is None  # the same size, another file
    assert identify_file(DATA_FILES["longmemeval_m-original"]["bytes"], "0" * 64)["known"] == "longmemeval_m-original"
    assert identify_file(123, None) == {"known": None, "label": "not a published release", "matched_by": None}
