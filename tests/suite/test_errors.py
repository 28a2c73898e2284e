"""One error base, and no silent catch-all: every exception class the package defines is a `ToyError` (a stable
`code`, a `message`), and no `except Exception:` (or `BaseException`, or a bare `except:`) just passes."""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import toy_runtime
from toy_runtime.errors import CliError, ToyError

ROOT = Path(__file__).resolve().parents[2]
CATCH_ALL = {"Exception", "BaseException"}


@functools.cache
def _exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in toy_runtime (nested ones too), by qualified name."""
    found: dict[str, type[BaseException]] = {}

    def visit(owner: object, module: str) -> None:
        for value in vars(owner).values():
            if inspect.isclass(value) and value.__module__ == module and value.__qualname__.startswith(
                    getattr(owner, "__qualname__", "")):
                if issubclass(value, BaseException):
                    found[f"{module}.{value.__qualname__}"] = value
                visit(value, module)

    for info in pkgutil.walk_packages(toy_runtime.__path__, "toy_runtime."):
        if info.name == "toy_runtime.__main__":  # runs the CLI when imported
            continue
        module = importlib.import_module(info.name)
        visit(module, module.__name__)
    return found


def test_every_exception_class_in_the_package_is_a_toy_error():
    classes = _exception_classes()
    assert len(classes) >= 25  # the walk found the package's errors, not an empty set
    outside = sorted(name for name, cls in classes.items() if not issubclass(cls, ToyError))
    assert not outside, f"not under ToyError: {outside}"


def test_each_error_class_names_its_own_stable_code():
    classes = _exception_classes() | {"toy_runtime.errors.ToyError": ToyError}
    undeclared = sorted(name for name, cls in classes.items() if "code" not in vars(cls))
    assert not undeclared, f"no `code` of their own: {undeclared}"
    by_code: dict[str, list[str]] = {}
    for name, cls in classes.items():
        assert isinstance(cls.code, str) and cls.code, name
        by_code.setdefault(cls.code, []).append(name)
    assert {code: names for code, names in by_code.items() if len(names) > 1} == {}


def test_a_toy_error_keeps_what_the_raiser_passed_and_the_builtin_it_also_is():
    error = CliError("--count: not a number")
    assert (error.code, error.message, str(error), error.args) == (
        "usage", "--count: not a number", "--count: not a number", ("--count: not a number",))
    from toy_runtime.events.registry import UnknownEvent

    with pytest.raises(KeyError) as caught:  # callers that catch the builtin still catch it
        raise UnknownEvent("device.volume.set")
    assert isinstance(caught.value, ToyError) and caught.value.code == "unknown_event"
    assert str(caught.value) == "'device.volume.set'"  # KeyError's own text, as before
    from toy_runtime.agent.llm import LLMFault

    fault = LLMFault("http_404", "no such model")
    assert (fault.code, fault.message, str(fault)) == ("http_404", "no such model", "http_404: no such model")


def _silent_catch_alls(source: str, filename: str) -> list[str]:
    """`file:line` of each handler that catches everything and does nothing else (`pass` or `...`)."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.ExceptHandler):
            continue
        caught = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
        catch_all = node.type is None or any(isinstance(c, ast.Name) and c.id in CATCH_ALL for c in caught)
        silent = all(isinstance(s, ast.Pass) or isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                     for s in node.body)
        if catch_all and silent:
            found.append(f"{filename}:{node.lineno}")
    return found


def test_no_catch_all_handler_in_the_package_just_passes():
    silent = []
    for package in ("toy_runtime", "firmware_bridge"):
        for path in sorted((ROOT / package).rglob("*.py")):
            silent += _silent_catch_alls(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert not silent, "narrow these to what can occur, or log what happened: " + ", ".join(silent)


def test_the_check_finds_a_silent_handler():
    source = ("try:\n    f()\nexcept Exception:\n    pass\n"
              "try:\n    f()\nexcept (OSError, BaseException) as exc:\n    ...\n"
              "try:\n    f()\nexcept:\n    pass\n"
              "try:\n    f()\nexcept ValueError:\n    pass\n"  # narrowed: allowed
              "try:\n    f()\nexcept Exception:\n    log.debug('x')\n")  # told: allowed
    assert _silent_catch_alls(source, "m.py") == ["m.py:3", "m.py:7", "m.py:11"]
