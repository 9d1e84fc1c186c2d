#!/usr/bin/env bash
# Install Arize Phoenix (the trace UI tests/instrumentation/test_phoenix_live.py exports live runs to) into its OWN virtualenv:
#   ~/.cache/causaltrace/phoenix-venv   (or $CAUSALTRACE_PHOENIX_VENV)
# never into the project's .venv: arize-phoenix is large (~850 MB of dependencies) and pins versions of packages
# the project also uses. The version is pinned (PHOENIX_VERSION); a venv whose `phoenix` already reports that
# version is kept (warm run: well under a second). Cold: several minutes on 2 cores (pip resolves and unpacks ~150
# wheels). Concurrent runs are serialised by a lock in the cache. Exits non-zero when the install fails; the
# tests then skip, or fail under CAUSALTRACE_STRICT=1.
set -euo pipefail

PHOENIX_VERSION="${PHOENIX_VERSION:-20.26.1}"
CACHE="${HOME}/.cache/causaltrace"
VENV="${CAUSALTRACE_PHOENIX_VENV:-${CACHE}/phoenix-venv}"
PY="${PYTHON:-python3}"

log() { echo "[install_phoenix] $*" >&2; }

mkdir -p "${CACHE}"
exec 9>"${CACHE}/phoenix.lock"
flock 9

installed() {
    "${VENV}/bin/python" -c 'import importlib.metadata as m; print(m.version("arize-phoenix"))' 2>/dev/null || true
}

start=${SECONDS}
if [[ "$(installed)" == "${PHOENIX_VERSION}" ]]; then
    log "arize-phoenix ${PHOENIX_VERSION} present in ${VENV} ($((SECONDS - start)) s)"
    exit 0
fi
log "installing arize-phoenix ${PHOENIX_VERSION} into ${VENV} (cold: several minutes)"
[[ -x "${VENV}/bin/python" ]] || "${PY}" -m venv "${VENV}"
"${VENV}/bin/python" -m pip install -q --upgrade pip
"${VENV}/bin/python" -m pip install -q "arize-phoenix==${PHOENIX_VERSION}"
if [[ "$(installed)" != "${PHOENIX_VERSION}" ]]; then
    log "ERROR: arize-phoenix ${PHOENIX_VERSION} is not importable from ${VENV} after the install"
    exit 1
fi
log "installed arize-phoenix ${PHOENIX_VERSION} in $((SECONDS - start)) s"
