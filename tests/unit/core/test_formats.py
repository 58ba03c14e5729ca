"""The dataset-format table (memobench.core.formats) is the one home of what a
format means: the schema's enum, the normalize readers, the families and the
document rule all follow it, and a family that does not read a format is a
config error naming both."""

from __future__ import annotations

import inspect

import pytest
import yaml

from tests.helpers import REPO
from memobench.core.config import ConfigError, dataset_family, validate
from memobench.datasets import normalize
from memobench.core.formats import DEFAULT_FAMILY, FORMATS, LME_FORMATS, USER_TURN_FAMILIES
from memobench.core.formats import user_turns_only

SCHEMA = REPO / "workflow/schemas/config.schema.yaml"


def test_the_schema_lists_the_tables_formats_and_families():
    props = yaml.safe_load(SCHEMA.read_text())["properties"]["datasets"]["additionalProperties"]["properties"]
    assert props["format"]["enum"] == list(FORMATS)
    assert set(props["family"]["enum"]) == {fam for f in FORMATS.values() for fam in f.families}


@pytest.mark.parametrize("name", FORMATS)
def test_each_format_has_its_reader_and_rules(name):
    fmt = FORMATS[name]
    reader = getattr(normalize, fmt.reader)
    params = list(inspect.signature(reader).parameters)
    # what the normalize stage passes: the raw file, the base dataset's questions table, the output tables
    expected = (["path"] if fmt.raw_file else []) + (["base"] if fmt.searches_haystacks_of else []) + ["out"]
    assert params[:len(expected)] == expected
    assert DEFAULT_FAMILY[name] == fmt.families[0] == dataset_family({"format": name})
    assert user_turns_only(name) == (fmt.documents == "user")
    assert all((fam in USER_TURN_FAMILIES) == (fmt.documents == "user") for fam in fmt.families)
    assert (name in LME_FORMATS) == (fmt.scorer == "longmemeval")


def test_a_family_that_does_not_read_the_format_is_one_line(tmp_path):
    raw = REPO / ".test/data/lme_tiny.json"
    config = {"data_dir": str(raw.parent), "datasets": {"tiny": {
        "format": "longmemeval", "family": "locomo", "file": raw.name, "bytes": raw.stat().st_size,
        "variants": ["v0.8.0"]}}}
    with pytest.raises(ConfigError, match=r"dataset 'tiny': family 'locomo' does not read format 'longmemeval' "
                                          r"\(its families: s, m\)"):
        validate(config, SCHEMA)
