"""Load an automaton from whatever the user gave: a Semiautomaton, a dict, a JSON file
or a catalog name (the one entry point above :mod:`.spec` and :mod:`.catalog`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from .catalog import build
from .errors import SpecError
from .spec import Semiautomaton, from_dict


def load_spec(source: "str | Path | Mapping[str, Any] | Semiautomaton") -> Semiautomaton:
    """Load an automaton from a dict, a JSON file path, or a catalog name."""
    if isinstance(source, Semiautomaton):
        return source
    if isinstance(source, Mapping):
        return from_dict(source)
    path = Path(source)
    if path.suffix == ".json" or path.exists():
        if not path.is_file():
            raise SpecError(f"spec file {str(path)!r} does not exist")
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError) as e:
            raise SpecError(f"cannot read spec file {str(path)!r}: {e}") from None
        except json.JSONDecodeError as e:
            raise SpecError(f"spec file {str(path)!r} is not valid JSON: {e}") from None
        return from_dict(data, default_name=path.stem)
    return build(str(source))
