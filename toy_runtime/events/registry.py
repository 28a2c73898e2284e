"""The flat registry of event definitions, with the name ↔ provider-tool-name mapping."""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping

from ..errors import ToyError
from .definition import EventDefinition

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator


class UnknownEvent(ToyError, KeyError):
    """Raised when a name or tool name is not in the registry."""

    code = "unknown_event"


class EventRegistry:
    """An ordered, flat set of definitions; a subset can be enabled per session.

    Argument schemas are checked against the JSON Schema meta-schema and compiled on first use, or all at once by
    `verify()`: jsonschema costs ~0.15 s to import and check four schemas, which a voice service should spend
    after it is listening rather than before (`toy-runtime run` verifies right after start-up).
    """

    def __init__(self, definitions: Iterable[EventDefinition] = ()) -> None:
        self._by_name: dict[str, EventDefinition] = {}
        self._by_tool: dict[str, EventDefinition] = {}
        self._validators: dict[str, Draft202012Validator] = {}
        # jsonschema walks conditional schemas slowly (~0.1-0.5 ms); normalized arguments repeat a lot
        # ("louder" is always {"mode": "relative", "delta": 10}), so verdicts are memoized, bounded.
        self._verdicts: OrderedDict[tuple[str, str], tuple[str, ...]] = OrderedDict()
        for definition in definitions:
            self.register(definition)

    def register(self, definition: EventDefinition) -> None:
        if definition.name in self._by_name:
            raise ValueError(f"event {definition.name!r} registered twice")
        if definition.tool_name in self._by_tool:
            raise ValueError(f"tool name {definition.tool_name!r} used twice")
        if not isinstance(definition.schema, Mapping) or definition.schema.get("type") != "object":
            raise ValueError(f"event {definition.name!r}: the arguments schema must be a JSON object schema")
        self._by_name[definition.name] = definition
        self._by_tool[definition.tool_name] = definition

    def verify(self) -> None:
        """Check every argument schema against the meta-schema now (raises jsonschema's SchemaError)."""
        for name in self._by_name:
            self.validator(name)

    def get(self, name: str) -> EventDefinition:
        try:
            return self._by_name[name]
        except KeyError:
            raise UnknownEvent(name) from None

    def by_tool_name(self, tool_name: str) -> EventDefinition:
        try:
            return self._by_tool[tool_name]
        except KeyError:
            raise UnknownEvent(tool_name) from None

    def lookup(self, name_or_tool: str) -> EventDefinition | None:
        """Find by namespaced name or provider tool name; None when unknown."""
        return self._by_name.get(name_or_tool) or self._by_tool.get(name_or_tool)

    def validator(self, name: str) -> Draft202012Validator:
        """The compiled validator of `name`'s arguments schema (checked against the meta-schema once)."""
        validator = self._validators.get(name)
        if validator is None:
            validator = self._validators[name] = _compile(self.get(name).schema)
        return validator

    def schema_errors(self, name: str, arguments: Mapping[str, Any], *, cache_size: int = 1024) -> tuple[str, ...]:
        """JSON-Schema violations of `arguments` for `name`, most specific first; () when valid."""
        from .idempotency import canonical_json

        key = (name, canonical_json(arguments))
        cached = self._verdicts.get(key)
        if cached is not None:
            self._verdicts.move_to_end(key)
            return cached
        validator = self.validator(name)
        verdict: tuple[str, ...] = ()
        if not validator.is_valid(dict(arguments)):
            errors = sorted(validator.iter_errors(dict(arguments)), key=lambda e: (len(list(e.path)), e.message))
            verdict = tuple(f"{'/'.join(str(p) for p in e.path)}: {e.message}" if list(e.path) else e.message
                            for e in errors)
        self._verdicts[key] = verdict
        if len(self._verdicts) > cache_size:
            self._verdicts.popitem(last=False)
        return verdict

    def subset(self, names: Iterable[str] | None) -> "EventRegistry":
        """A registry holding only the enabled names (None = all), in registration order."""
        if names is None:
            return self
        wanted = set(names)
        unknown = wanted - set(self._by_name)
        if unknown:
            raise UnknownEvent(", ".join(sorted(unknown)))
        return EventRegistry(d for d in self if d.name in wanted)  # checked schemas are shared (_compile)

    @property
    def names(self) -> list[str]:
        return list(self._by_name)

    def __iter__(self) -> Iterator[EventDefinition]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def advertised(self) -> list[EventDefinition]:
        """The definitions the ChatAgent is told about (catalog and tools); unadvertised ones still resolve."""
        return [d for d in self if d.advertised]

    def catalog_lines(self) -> list[str]:
        """`name: description` lines for the dual_agent event catalog."""
        return [f"{d.name}: {d.model_description}" for d in self.advertised()]

    def provider_tools(self) -> list[dict]:
        """The `tools` list for chat_agent_tools mode."""
        return [d.provider_tool() for d in self.advertised()]


_CHECKED: dict[str, Any] = {}  # canonical schema JSON -> compiled validator: subsets and runtimes share the work


def _compile(schema: Mapping[str, Any]) -> "Draft202012Validator":
    import json

    from jsonschema import Draft202012Validator

    key = json.dumps(schema, sort_keys=True, default=str)
    validator = _CHECKED.get(key)
    if validator is None:
        Draft202012Validator.check_schema(schema)
        validator = _CHECKED[key] = Draft202012Validator(schema)
    return validator
