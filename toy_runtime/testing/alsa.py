"""ALSA as the toy has it: this machine's ALSA configuration with the toy's drop-in added, for one child process.

`scripts/install-pi.sh` installs `configs/alsa/99-toy-runtime.conf` into `/etc/alsa/conf.d` on the toy (it keeps
ALSA's a52 codec plugin, 13.6 MB of libraries, out of the runtime). A development machine usually lacks it, so a
bench run there would measure a different process than the toy runs. ALSA reads one top-level file, named by
`ALSA_CONFIG_PATH`, which names the drop-in directory: `toy_alsa_config` writes a copy of the system's file that
points at a directory holding the same drop-ins as `/etc/alsa/conf.d` (links) plus, or minus, the toy's.

    env["ALSA_CONFIG_PATH"] = str(toy_alsa_config(tmp_dir))
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["OVERRIDE_NAME", "SYSTEM_CONFIG", "SYSTEM_DROP_INS", "override_installed", "repo_override",
           "toy_alsa_config"]

SYSTEM_CONFIG = Path("/usr/share/alsa/alsa.conf")
SYSTEM_DROP_INS = Path("/etc/alsa/conf.d")
OVERRIDE_NAME = "99-toy-runtime.conf"


def repo_override() -> Path | None:
    """The drop-in in this checkout (`configs/alsa/`), or None when the package runs without its repository."""
    path = Path(__file__).resolve().parents[2] / "configs" / "alsa" / OVERRIDE_NAME
    return path if path.is_file() else None


def override_installed() -> bool:
    """True when this machine's ALSA already has the toy's drop-in (as on the toy)."""
    return (SYSTEM_DROP_INS / OVERRIDE_NAME).is_file()


def toy_alsa_config(directory: Path, *, with_override: bool = True, override: Path | None = None) -> Path:
    """A top-level ALSA config in `directory` for `ALSA_CONFIG_PATH`: this machine's, with the toy's drop-in
    (`override`, default the checkout's) when `with_override`, without it otherwise (even if it is installed).

    Raises FileNotFoundError when the machine has no ALSA configuration or the drop-in cannot be found, and
    ValueError when the system file does not name `/etc/alsa/conf.d` (an ALSA this cannot adapt)."""
    system = SYSTEM_CONFIG.read_text()
    if f'"{SYSTEM_DROP_INS}"' not in system:
        raise ValueError(f"{SYSTEM_CONFIG} does not read {SYSTEM_DROP_INS}")
    override = override or repo_override()
    if with_override and override is None:
        raise FileNotFoundError(f"configs/alsa/{OVERRIDE_NAME} (the repository checkout is needed)")
    conf_d = directory / ("alsa-conf.d-toy" if with_override else "alsa-conf.d-stock")
    conf_d.mkdir(parents=True, exist_ok=True)
    for drop_in in SYSTEM_DROP_INS.glob("*.conf"):
        if drop_in.name != OVERRIDE_NAME and not (conf_d / drop_in.name).exists():
            (conf_d / drop_in.name).symlink_to(drop_in.resolve())
    if with_override:
        assert override is not None
        (conf_d / OVERRIDE_NAME).write_bytes(override.read_bytes())
    config = directory / f"{conf_d.name}.alsa.conf"  # not inside conf_d: ALSA would load it as a drop-in too
    config.write_text(system.replace(f'"{SYSTEM_DROP_INS}"', f'"{conf_d}"', 1))
    return config
