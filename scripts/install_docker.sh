#!/usr/bin/env bash
# Install a Docker engine and build the sandbox image the live DockerSandbox tests use (Debian, as root):
#   1. `apt-get install docker.io debootstrap` when `dockerd` or `debootstrap` is missing (Debian's docker.io is
#      dockerd 20.10 with containerd and runc). The package's init script is kept from starting a daemon during the
#      install (a temporary policy-rc.d): the tests start their own daemon, see tests/_docker.py.
#   2. Images cannot be pulled here (no Docker Hub), so the image is built from Debian packages: a
#      `debootstrap --variant=minbase` bookworm root file system with python3 and python-is-python3 (`python3-minimal`
#      alone lacks `json` and the `python` name), trimmed (docs, man pages, apt caches) and packed once into
#        ~/.cache/causaltrace/docker/sandbox-python-bookworm.tar
#      which `docker import` turns into the image `causaltrace/sandbox-python:bookworm` (DockerSandbox's `image=`
#      or $CAUSALTRACE_DOCKER_IMAGE). The tests' fixture imports the tarball into the daemon it uses.
#   3. If a Docker daemon already answers on the default socket and lacks that image, it is imported there too.
# Not root or no apt-get: says what is missing and exits 0 (the live Docker tests then skip; under
# CAUSALTRACE_STRICT=1 they fail). Idempotent; concurrent runs are serialised by a lock in the cache.
set -euo pipefail

IMAGE="causaltrace/sandbox-python:bookworm"
SUITE="bookworm"
CACHE="${HOME}/.cache/causaltrace/docker"
TARBALL="${CACHE}/sandbox-python-${SUITE}.tar"

log() { echo "[install_docker] $*" >&2; }

need_pkgs=()
command -v dockerd >/dev/null 2>&1 || need_pkgs+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || [[ -s "${TARBALL}" ]] || need_pkgs+=(debootstrap)

if [[ ${#need_pkgs[@]} -ne 0 ]]; then
    if [[ "$(id -u)" -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
        log "missing Debian packages: ${need_pkgs[*]}; not root or no apt-get: install them yourself"
        log "(e.g. 'sudo apt-get install -y ${need_pkgs[*]}'); the live Docker tests will skip."
        exit 0
    fi
    export DEBIAN_FRONTEND=noninteractive
    added_policy=""
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then  # no daemon started by the package's postinst
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        added_policy=1
    fi
    log "apt-get install ${need_pkgs[*]}"
    start=${SECONDS}
    apt-get -o DPkg::Lock::Timeout=300 update -qq >/dev/null
    status=0
    apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null \
        2> >(grep -v 'since apt-utils is not installed' >&2 || true) || status=$?
    [[ -n "${added_policy}" ]] && rm -f /usr/sbin/policy-rc.d
    if [[ ${status} -ne 0 ]]; then
        log "ERROR: apt-get install ${need_pkgs[*]} failed (exit ${status})"
        exit 1
    fi
    log "installed ${need_pkgs[*]} in $((SECONDS - start)) s ($(dockerd --version 2>/dev/null || echo 'no dockerd'))"
else
    log "dockerd present: $(dockerd --version)"
fi

mirror() {
    # The Debian mirror apt uses (deb822 .sources or a classic sources.list), else deb.debian.org.
    local uri
    uri="$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | awk '/^URIs:/ {u=$2} /^Suites:/ && $0 ~ /(^|[ \t])'"${SUITE}"'([ \t]|$)/ {print u; exit}')"
    if [[ -z "${uri}" ]]; then
        uri="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
            | awk '$1 == "deb" && $3 == "'"${SUITE}"'" {print $2; exit}')"
    fi
    echo "${uri:-http://deb.debian.org/debian}"
}

build_tarball() {
    local work rootfs url
    work="$(mktemp -d "${TMPDIR:-/tmp}/causaltrace-rootfs.XXXXXX")"
    rootfs="${work}/rootfs"
    # shellcheck disable=SC2064
    trap "rm -rf '${work}' '${TARBALL}.partial'" EXIT
    url="$(mirror)"
    log "debootstrap --variant=minbase ${SUITE} with python3 from ${url} (~1 min)"
    start=${SECONDS}
    if ! debootstrap --variant=minbase --include=python3,python-is-python3 "${SUITE}" "${rootfs}" "${url}" \
            >"${work}/debootstrap.log" 2>&1; then
        log "ERROR: debootstrap failed; last lines of its log:"
        tail -n 30 "${work}/debootstrap.log" >&2
        exit 1
    fi
    rm -rf "${rootfs}"/var/cache/apt/archives/*.deb "${rootfs}"/var/lib/apt/lists/* \
        "${rootfs}"/usr/share/doc/* "${rootfs}"/usr/share/man/* "${rootfs}"/usr/share/info/* \
        "${rootfs}"/var/log/* "${rootfs}"/dev/* "${rootfs}"/proc/* "${rootfs}"/sys/*
    if ! chroot "${rootfs}" python -c 'import json, sqlite3' >/dev/null; then
        log "ERROR: the root file system has no working python"
        exit 1
    fi
    tar -C "${rootfs}" --numeric-owner --sort=name -cf "${TARBALL}.partial" .
    mv -f "${TARBALL}.partial" "${TARBALL}"
    rm -rf "${work}"
    trap - EXIT
    log "built ${TARBALL} ($(du -h "${TARBALL}" | cut -f1)) in $((SECONDS - start)) s"
}

mkdir -p "${CACHE}"
exec 9>"${CACHE}/.lock"
flock 9
if [[ -s "${TARBALL}" ]]; then
    log "sandbox image root file system cached: ${TARBALL}"
elif [[ "$(id -u)" -ne 0 ]]; then
    log "not root: cannot debootstrap the sandbox image; the live Docker tests will skip."
    exit 0
else
    build_tarball
fi

# A daemon that already answers (not one we start) gets the image too, so DockerSandbox(image=...) works there.
if command -v docker >/dev/null 2>&1 && docker version --format '{{.Server.Version}}' >/dev/null 2>&1; then
    if docker image inspect "${IMAGE}" >/dev/null 2>&1; then
        log "the running Docker daemon has ${IMAGE}"
    else
        log "importing ${IMAGE} into the running Docker daemon"
        docker import "${TARBALL}" "${IMAGE}" >/dev/null
    fi
fi
