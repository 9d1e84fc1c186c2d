"""Print a pip constraints file that pins every lower bound pyproject.toml declares (``name>=X`` -> ``name==X``).

Used by scripts/install_lower_bounds.sh (``pip install --constraint``) and tests/test_install.py: the base
dependencies and every runtime extra (``dev`` is the test tooling, not the package's). An exact pin (``==``) is kept
as it is; a requirement with no lower bound is left to pip. Standard library only (it runs before any install).

    python scripts/lower_bounds.py            # the constraints, one per line
    python scripts/lower_bounds.py --json     # {"name": "version", ...}
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
SKIPPED_EXTRAS = {"dev"}
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(.*?)\s*(?:;.*)?$")


def lower_bounds(pyproject: Path = PYPROJECT) -> dict[str, str]:
    """``{distribution name: its declared lower bound}`` over the base dependencies and the runtime extras."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra, items in project.get("optional-dependencies", {}).items():
        if extra not in SKIPPED_EXTRAS:
            requirements += [r for r in items if not r.startswith(f"{project['name']}[")]
    bounds: dict[str, str] = {}
    for requirement in requirements:
        match = _REQUIREMENT.match(requirement)
        if match is None:
            raise SystemExit(f"cannot read the requirement {requirement!r}")
        name, specifiers = match.group(1).lower().replace("_", "-"), match.group(2)
        for spec in specifiers.split(","):
            spec = spec.strip()
            for op in ("==", ">="):
                if spec.startswith(op):
                    version = spec[len(op):].strip()
                    if bounds.get(name, version) != version:
                        raise SystemExit(f"{name} has two lower bounds: {bounds[name]} and {version}")
                    bounds[name] = version
    return bounds


if __name__ == "__main__":
    found = lower_bounds()
    if "--json" in sys.argv[1:]:
        print(json.dumps(found, indent=2, sort_keys=True))
    else:
        print("\n".join(f"{name}=={version}" for name, version in sorted(found.items())))
