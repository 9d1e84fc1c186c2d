#!/usr/bin/env bash
# Install the system tools some tests use (Debian):
#   bubblewrap (`bwrap`)  - sandbox for executing agent code;
#   chromium (`chromium`) - headless browser for the HTML report test.
# Runs `apt-get update` + `apt-get install -y` only when a tool is missing, and only as root with apt-get;
# otherwise it prints what is missing and exits 0 (the tests that need a missing tool skip). Idempotent.
set -euo pipefail

log() { echo "[install_system] $*" >&2; }

# tool -> Debian package
declare -A PACKAGE_OF=([bwrap]=bubblewrap [chromium]=chromium)

missing_tools=()
missing_pkgs=()
for tool in bwrap chromium; do
    if command -v "${tool}" >/dev/null 2>&1; then
        log "${tool}: present ($(command -v "${tool}"))"
    else
        missing_tools+=("${tool}")
        missing_pkgs+=("${PACKAGE_OF[${tool}]}")
    fi
done

if [[ ${#missing_tools[@]} -eq 0 ]]; then
    log "nothing to install"
    exit 0
fi

if [[ "$(id -u)" -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    log "missing: ${missing_tools[*]} (Debian packages: ${missing_pkgs[*]})."
    log "not root or no apt-get: install them yourself, e.g. 'sudo apt-get install -y ${missing_pkgs[*]}';"
    log "tests needing them will skip."
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
log "apt-get update"
apt-get update -qq >/dev/null
log "apt-get install ${missing_pkgs[*]}"
# (drop debconf's "delaying package configuration, since apt-utils is not installed" notice; keep real errors)
apt-get install -y -qq "${missing_pkgs[@]}" >/dev/null 2> >(grep -v 'since apt-utils is not installed' >&2 || true)

still_missing=()
for tool in "${missing_tools[@]}"; do
    command -v "${tool}" >/dev/null 2>&1 || still_missing+=("${tool}")
done
if [[ ${#still_missing[@]} -ne 0 ]]; then
    log "ERROR: still missing after apt-get install: ${still_missing[*]}"
    exit 1
fi
log "installed: ${missing_pkgs[*]}"
