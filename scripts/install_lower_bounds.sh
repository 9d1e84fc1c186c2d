#!/usr/bin/env bash
# A second virtualenv with EVERY lower bound pyproject.toml declares pinned (base dependencies and the runtime
# extras; scripts/lower_bounds.py writes the constraints): ~/.cache/causaltrace/lower-bounds/venv (or
# $CAUSALTRACE_LOWER_BOUNDS_VENV). tests/test_install.py imports causaltrace in it and traces both example teams
# with this checkout's sources (PYTHONPATH=src), so a bound that is too low fails a test instead of a user's install.
# Cached: the venv is kept while the constraints (and the interpreter) are unchanged — a second run only compares a
# stamp (well under a second). Cold: pip resolves and installs ~110 wheels (about 2 min on 2 quiet cores).
# Concurrent runs are serialised by a lock in the cache. Exits non-zero when the install fails; the test then skips,
# or fails under CAUSALTRACE_STRICT=1.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE="${HOME}/.cache/causaltrace"
VENV="${CAUSALTRACE_LOWER_BOUNDS_VENV:-${CACHE}/lower-bounds/venv}"
PY="${PYTHON:-python3}"

log() { echo "[install_lower_bounds] $*" >&2; }

mkdir -p "${CACHE}" "$(dirname "${VENV}")"
exec 9>"${CACHE}/lower-bounds.lock"
flock 9

start=${SECONDS}
constraints="$("${PY}" scripts/lower_bounds.py)"
stamp="$(printf '%s\n%s\n' "$("${PY}" -c 'import sys; print(sys.version)')" "${constraints}" | sha256sum | cut -c1-16)"
if [[ -x "${VENV}/bin/python" && "$(cat "${VENV}/.causaltrace-stamp" 2>/dev/null)" == "${stamp}" ]]; then
    log "every lower bound present in ${VENV} ($((SECONDS - start)) s)"
    exit 0
fi
log "installing every declared lower bound into ${VENV} (cold: about 2 min)"
rm -rf "${VENV}"
"${PY}" -m venv "${VENV}"
"${VENV}/bin/python" -m pip install -q --upgrade pip
printf '%s\n' "${constraints}" > "${VENV}/constraints.txt"
"${VENV}/bin/python" -m pip install -q --constraint "${VENV}/constraints.txt" ".[all]"
"${VENV}/bin/python" -c 'import causaltrace' || { log "ERROR: import causaltrace fails at the lower bounds"; exit 1; }
printf '%s\n' "${stamp}" > "${VENV}/.causaltrace-stamp"
log "installed every lower bound in $((SECONDS - start)) s"
