"""Names in the settings tree: unknown `TOY_` environment variables are errors, with a "did you mean" for typos.

pydantic-settings reads only the `TOY_` variables that name a field and silently ignores the rest, so a typo in a
section (`TOY_LMM__BASE_URL`) would leave the toy offline without a word. `check_environment` refuses such a name
before the settings are built; `suggest` gives the closest known name for an unknown TOML key too.
"""

from __future__ import annotations

import difflib
from typing import Iterable, Mapping

from pydantic import BaseModel

ENV_PREFIX = "TOY_"
DELIMITER = "__"

# Switches of the test harness (testing/services.py, tests/hil), not settings: allowed in the environment.
NOT_SETTINGS = ("TOY_REQUIRE_SERVICES", "TOY_HIL_")


def suggest(name: str, known: Iterable[str]) -> str:
    """` (did you mean X?)` for the closest known name, or "" when nothing is close."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def _section_model(settings_cls: type[BaseModel], section: str) -> type[BaseModel] | None:
    annotation = settings_cls.model_fields[section].annotation
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def env_names(settings_cls: type[BaseModel]) -> list[str]:
    """Every environment variable that sets something: `TOY_<FIELD>`, `TOY_<SECTION>` (JSON), `TOY_<SECTION>__<KEY>`."""
    names = []
    for section in settings_cls.model_fields:
        names.append(f"{ENV_PREFIX}{section}".upper())
        model = _section_model(settings_cls, section)
        if model is not None:
            names += [f"{ENV_PREFIX}{section}{DELIMITER}{key}".upper() for key in model.model_fields]
    return names


def check_environment(settings_cls: type[BaseModel], environ: Mapping[str, str]) -> str | None:
    """The one-line problem with the first `TOY_` variable that names no setting, or None when all are known."""
    known = env_names(settings_cls)
    known_set = set(known)
    for name in sorted(environ):
        upper = name.upper()  # the settings are case-insensitive, like pydantic-settings reads them
        if not upper.startswith(ENV_PREFIX) or upper.startswith(NOT_SETTINGS) or upper in known_set:
            continue
        section = upper[len(ENV_PREFIX):].split(DELIMITER)[0].lower()
        if section not in settings_cls.model_fields:
            what = "unknown section" if DELIMITER in upper else "unknown setting"
            return f"{name}: {what} {section!r}{suggest(upper, known)}"
        return f"{name}: unknown key{suggest(upper, known)}"
    return None


def unknown_key_hint(settings_cls: type[BaseModel], loc: tuple) -> str:
    """The "did you mean" for a TOML key reported unknown at `loc` (section, key) or (key,)."""
    if len(loc) == 1:
        return suggest(str(loc[0]), settings_cls.model_fields)
    section = str(loc[0])
    if section in settings_cls.model_fields and len(loc) == 2:
        model = _section_model(settings_cls, section)
        if model is not None:
            return suggest(str(loc[1]), model.model_fields)
    return ""


def field_loc(settings_cls: type[BaseModel], loc: tuple) -> tuple:
    """The settings key of an error location, without pydantic's union-member tags ("audio.input_device.str")."""
    section = str(loc[0]) if loc else ""
    model = _section_model(settings_cls, section) if section in settings_cls.model_fields else None
    depth = 2 if model is not None else 1
    return tuple(loc[:depth]) + tuple(p for p in loc[depth:] if isinstance(p, int))[:1]  # keep a list index


def env_source(error: dict, environ: Mapping[str, str]) -> str:
    """` [from TOY_X__Y]` when the bad value came from the environment, so the user knows where to look."""
    loc = [str(p) for p in error["loc"][:2]]
    for depth in (2, 1):
        name = ENV_PREFIX + DELIMITER.join(loc[:depth]).upper()
        if len(loc) >= depth and any(key.upper() == name for key in environ):
            return f" [from {name}]"
    return ""
