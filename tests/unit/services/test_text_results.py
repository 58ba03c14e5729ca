"""A service that answers in text, as config states it: results.text / results.split and attribution checked
(services/definition/variant.py, the schema), part of the variant's definition, and an answer's texts read
(services/operations/calls.py)."""

from __future__ import annotations

import json

import pytest

from memobench.catalog.variants import resolve
from memobench.core.config import validate
from memobench.core.errors import ConfigError
from memobench.retrieval.returned import RetrieverError
from memobench.services.definition.variant import definition
from memobench.services.operations.calls import answers_in_text, result_ids, result_texts
from tests.helpers import REPO

URL = "http://127.0.0.1:9"


def _variant(**system):
    return resolve("t", "s", {"t": {"system": {"url": URL, **system}}})


def test_a_text_variant_keeps_its_attribution_in_its_definition():
    plain = _variant()
    assert not answers_in_text(plain.retriever) and "attribution" not in plain.retriever
    text = _variant(results={"id": None, "text": "content"})
    assert answers_in_text(text.retriever)
    assert text.retriever["attribution"] == {"overlap": None, "min_tokens": 3}
    digests = {definition(v) for v in (plain, text, _variant(results={"id": None, "text": "content"},
                                                             attribution={"overlap": 0.6}),
                                        _variant(results={"id": None, "text": "content"},
                                                 attribution={"min_tokens": 2}),
                                        _variant(results={"text": "content"}))}
    assert len(digests) == 5
    # the defaults written out are the definition that leaves them out
    assert definition(_variant(results={"id": None, "text": "content"},
                               attribution={"overlap": None, "min_tokens": 3})) == definition(text)
    split = _variant(answer="plain", results={"list": "", "split": r"\n+"})
    assert split.retriever["results"]["id"] is None


@pytest.mark.parametrize("system, said", [
    ({"results": {"id": None}}, "id is null"),
    ({"attribution": {"overlap": 0.5}}, "attribution needs results.text"),
    ({"results": {"text": "a", "split": "b"}}, "not both"),
    ({"results": {"text": 3}}, "text must be a dotted path"),
    ({"results": {"split": "("}}, "not a regex"),
    ({"results": {"split": ",", "id": "id"}}, "split cuts a text answer"),
    ({"results": {"text": "t"}, "attribution": {"overlap": 2}}, "overlap must be"),
    ({"results": {"text": "t"}, "attribution": {"cutoff": 2}}, "unknown key"),
    ({"results": {"txt": "t"}}, "unknown key"),
])
def test_text_settings_are_checked_in_one_line_naming_the_variant(system, said):
    with pytest.raises(ConfigError, match=said) as e:
        _variant(**system)
    assert str(e.value).startswith("variant 't': system")


def test_the_schema_takes_the_text_settings():
    schema = REPO / "workflow" / "schemas" / "config.schema.yaml"
    base = yaml_config()
    base["variants"] = {"t": {"system": {"url": URL, "results": {"id": None, "text": "memory.text"},
                                         "attribution": {"overlap": 0.5, "min_tokens": 2}}}}
    validate(base, schema)
    base["variants"]["t"]["system"]["attribution"] = {"overlap": 0}
    with pytest.raises(ConfigError, match="overlap"):
        validate(base, schema)


def yaml_config() -> dict:
    import yaml

    return yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))


def test_texts_are_read_where_config_says_with_ids_beside_them_or_not():
    answer = {"hits": [{"ref": "s1", "memory": {"text": "first"}, "score": 2.0},
                       {"ref": "s2", "memory": {"text": "second"}, "score": 1.0}]}
    both = _variant(results={"list": "hits", "id": "ref", "text": "memory.text"}).retriever
    assert result_texts(answer, both, "w") == (["s1", "s2"], ["first", "second"], [2.0, 1.0])
    assert result_ids(answer, both, "w") == (["s1", "s2"], [2.0, 1.0])
    alone = _variant(results={"list": "hits", "id": None, "text": "memory.text"}).retriever
    assert result_texts(answer, alone, "w") == (None, ["first", "second"], [2.0, 1.0])
    # without ids a list is its texts: a repeated search compares as them
    assert result_ids(answer, alone, "w") == (["first", "second"], [2.0, 1.0])
    # a result holding several texts (an entity's observations): one item each, its id and score repeated
    many = {"hits": [{"ref": "s1", "obs": ["a", "b"], "score": 2.0}, {"ref": "s2", "obs": ["c"], "score": 1.0}]}
    both = _variant(results={"list": "hits", "id": "ref", "text": "obs"}).retriever
    assert result_texts(many, both, "w") == (["s1", "s1", "s2"], ["a", "b", "c"], [2.0, 2.0, 1.0])
    assert result_ids(many, both, "w") == (["s1", "s2"], [2.0, 1.0])
    split = _variant(answer="plain", results={"list": "", "split": r"\n-{3,}\n"}).retriever
    said = "first passage\n---\n  second passage \n---\n\n---\n"
    assert result_texts(said, split, "w") == (None, ["first passage", "second passage"], None)


@pytest.mark.parametrize("answer, said", [
    ({"hits": [{"memory": {}}]}, "no 'memory.text'"),
    ({"hits": [{"memory": {"text": 3}}]}, "not a string"),
    ({"hits": [{"memory": {"text": ["a", None]}}]}, "not a string or a list of strings"),
    ({"hits": "x"}, "not a list"),
])
def test_an_answer_without_its_texts_is_one_line(answer, said):
    alone = _variant(results={"list": "hits", "id": None, "text": "memory.text"}).retriever
    with pytest.raises(RetrieverError, match=said):
        result_texts(json.loads(json.dumps(answer)), alone, "variant 't': question 'q': search")


def test_a_python_retriever_returns_text_only_when_config_says_so():
    def spec(**r):
        return resolve("p", "s", {"p": {"retriever": {"callable": "m.py:f", **r}}}).retriever

    assert "returns" not in spec() and "attribution" not in spec() and spec() == spec(returns="ids")
    assert spec(returns="text")["attribution"] == {"overlap": None, "min_tokens": 3}
    assert spec(returns="text", attribution={"overlap": 0.5})["attribution"]["overlap"] == 0.5
    for bad, said in (({"returns": "texts"}, "returns 'texts' is not one of ids, text"),
                      ({"attribution": {"overlap": 0.5}}, "returns: text"),
                      ({"returns": "text", "attribution": {"min_tokens": 0}}, "min_tokens")):
        with pytest.raises(ConfigError, match=said):
            spec(**bad)
