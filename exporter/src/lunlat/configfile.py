"""The config file as the commands read it: `config.py`'s model with a section per registered engine
(`config_model(ENGINES)`), loaded and checked.

Here, at the top of the layers with the registry, and not in `config.py`: the config's model is
below the engines and the sources that read it, and only the assembled model names every engine.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from lunlat.config import CONFIG_MAX_BYTES, Config, config_model
from lunlat.engines.registry import ENGINES
from lunlat.yamlmodel import load_model, parse_model

# The model with every registered engine's section: what `serve`, `check-config`, `top` and the lab read.
CONFIG_MODEL: type[Config] = config_model(ENGINES)

KeyProblem = tuple[tuple[int | str, ...], str]


def parse_config(text: str, source: str = "<config>", check_secrets: bool = False) -> Config:
    """`check_secrets` also refuses password sources that cannot be read now (check-config)."""
    return parse_model(text, source, CONFIG_MODEL, _explain_extra, _secret_check if check_secrets else None)


def load_config(path: Path | None, check_secrets: bool = False) -> Config:
    """The config in `path`, or the embedded default when no path is given. `check_secrets` also
    refuses password sources that cannot be read now (check-config)."""
    if path is None:
        return CONFIG_MODEL()
    return load_model(
        path,
        CONFIG_MODEL,
        _explain_extra,
        _secret_check if check_secrets else None,
        max_bytes=CONFIG_MAX_BYTES,
    )


def driver_problems(config: Config) -> list[KeyProblem]:
    """What `serve` could not use for a target on this host: the engine's driver (the extra) not
    installed, or what the driver needs besides (engine.host_problems). Imports the drivers:
    check-config only."""
    problems: list[KeyProblem] = []
    for engine in ENGINES:
        found = config.targets(engine)
        if not found:
            continue
        if not _importable(engine.driver_module):
            missing = f"{engine.driver_name} is not installed: pip install 'lunlat[{engine.extra}]'{engine.install_hint}"
            problems += [((engine.key, i), missing) for i in range(len(found))]
        elif engine.host_problems is not None:
            problems += [((engine.key, *loc), text) for loc, text in engine.host_problems(found)]
    return problems


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def _secret_check(config: Config) -> list[KeyProblem]:
    """What check-config refuses beyond the file itself: what `serve` would refuse or could not serve."""
    return config.secret_problems() + driver_problems(config)


def _explain_extra(loc: tuple[int | str, ...]) -> str:
    if len(loc) == 3 and loc[0] in {engine.key for engine in ENGINES} and loc[2] == "password":
        return "passwords are never inline: use password_env or password_file"
    return "unknown key"
