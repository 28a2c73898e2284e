"""The registry: names, tool names, and argument schemas checked against the JSON Schema meta-schema."""

from __future__ import annotations

import dataclasses

import pytest
from jsonschema import SchemaError

from toy_runtime.events import EventRegistry

from .conftest import Recorder, make_definition


def test_registration_refuses_duplicates_and_non_object_schemas():
    recorder = Recorder()
    first = make_definition("demo.one", "demo_one", recorder.handler("demo.one"))
    registry = EventRegistry([first])
    with pytest.raises(ValueError, match="registered twice"):
        registry.register(first)
    with pytest.raises(ValueError, match="used twice"):
        registry.register(dataclasses.replace(first, name="demo.other"))
    with pytest.raises(ValueError, match="JSON object schema"):
        registry.register(dataclasses.replace(first, name="demo.list", tool_name="demo_list",
                                              schema={"type": "array"}))


def test_a_schema_that_breaks_the_meta_schema_is_refused_by_verify_and_on_first_use():
    recorder = Recorder()
    broken = dataclasses.replace(make_definition("demo.broken", "demo_broken", recorder.handler("b")),
                                 schema={"type": "object", "properties": {"n": {"type": "integr"}}})
    registry = EventRegistry([make_definition("demo.good", "demo_good", recorder.handler("g")), broken])
    with pytest.raises(SchemaError):
        registry.verify()
    with pytest.raises(SchemaError):
        registry.schema_errors("demo.broken", {"n": 1})
    assert registry.schema_errors("demo.good", {"n": 3}) == ()
    assert registry.schema_errors("demo.good", {"n": 30})  # maximum 10


def test_a_subset_keeps_the_checked_validators_and_order():
    recorder = Recorder()
    registry = EventRegistry([make_definition(f"demo.e{i}", f"demo_e{i}", recorder.handler("e")) for i in range(3)])
    registry.verify()
    subset = registry.subset(["demo.e2", "demo.e0"])
    assert subset.names == ["demo.e0", "demo.e2"]
    assert subset.validator("demo.e0") is registry.validator("demo.e0")
    assert subset.schema_errors("demo.e2", {"n": 11})
