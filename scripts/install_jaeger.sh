#!/usr/bin/env bash
# Build Jaeger v1.76.0 (= v2.13.0, all-in-one, in-memory storage) once into
#   ~/.cache/causaltrace/jaeger/v1.76.0/jaeger
# and copy the module's cmd/jaeger/internal/all-in-one.yaml next to it as all-in-one.yaml.
#
# Why not `go install ...@v1.76.0`: Jaeger's go.mod has a `replace` directive, and `go install pkg@version`
# refuses such modules. So we `go mod download` the module source, copy it out of the read-only module cache
# into a temp dir, `go build ./cmd/jaeger` there, and delete the copy. The UI in such a build is a placeholder
# (real assets come from a separate build step); the query APIs (/api/v3/..., /api/traces) work.
#
# Idempotent: does nothing if the binary exists and `jaeger --help` succeeds. If `go` is absent it says so and
# exits 0 (the Jaeger tests then skip). Everything is cached outside the clone.
#
# Running two instances side by side (tests/_jaeger.py does this on a copy of all-in-one.yaml): every listening
# port must be changed. In all-in-one.yaml the keys are (default port):
#   receivers.otlp.protocols.grpc.endpoint              4317   OTLP gRPC
#   receivers.otlp.protocols.http.endpoint              4318   OTLP HTTP
#   receivers.jaeger.protocols.grpc.endpoint            14250
#   receivers.jaeger.protocols.thrift_http.endpoint     14268
#   receivers.jaeger.protocols.thrift_binary.endpoint   6832 (UDP)
#   receivers.jaeger.protocols.thrift_compact.endpoint  6831 (UDP)
#   receivers.zipkin.endpoint                           9411
#   extensions.remote_sampling.http.endpoint            5778
#   extensions.remote_sampling.grpc.endpoint            5779
#   extensions.healthcheckv2.http.endpoint              13133  (GET /status answers when ready)
#   extensions.expvar.endpoint                          27777
#   extensions.zpages.endpoint                          27778
#   service.telemetry.metrics.readers[0].pull.exporter.prometheus.port   8888 (host is a separate key)
# and keys that must be ADDED because they fall back to fixed default ports:
#   extensions.jaeger_query.http.endpoint               16686  query HTTP API (/api/v3/services, ...)
#   extensions.jaeger_query.grpc.endpoint               16685  query gRPC API
#   extensions.healthcheckv2.grpc.endpoint              13132  the file has an EMPTY `grpc:` key, which enables
#                                                              the gRPC health server on its default port
# That is 16 listeners (14 TCP + 2 UDP); with them all moved, two instances run side by side (checked).
# The endpoints use "${env:JAEGER_LISTEN_HOST:-localhost}:PORT": set JAEGER_LISTEN_HOST=127.0.0.1.
# Also set extensions.jaeger_query.enable_tracing: false: it defaults to true and Jaeger then exports its own
# spans over OTLP gRPC to $OTEL_EXPORTER_OTLP_ENDPOINT (default localhost:4317), i.e. into whatever listens there.
# A component that fails to bind makes Jaeger log "address already in use" and then hang in shutdown (it does
# not exit): watch the log, don't wait for the exit code.
set -euo pipefail

JAEGER_VERSION="v1.76.0"
JAEGER_V2_VERSION="v2.13.0"
MODULE="github.com/jaegertracing/jaeger"
DEST="${HOME}/.cache/causaltrace/jaeger/${JAEGER_VERSION}"
BIN="${DEST}/jaeger"
YAML="${DEST}/all-in-one.yaml"

log() { echo "[install_jaeger] $*" >&2; }

GO="$(command -v go || true)"
if [[ -z "${GO}" && -x /usr/local/go/bin/go ]]; then
    GO=/usr/local/go/bin/go
fi
if [[ -z "${GO}" ]]; then
    log "Go toolchain not found (need Go >= 1.24.6 and the Go module proxy): Jaeger NOT installed;"
    log "the Jaeger tests will skip."
    exit 0
fi

installed_ok() {
    [[ -x "${BIN}" && -s "${YAML}" ]] && "${BIN}" --help >/dev/null 2>&1
}

if installed_ok; then
    log "Jaeger ${JAEGER_VERSION} already installed: ${BIN}"
    exit 0
fi

mkdir -p "${DEST}"
# Serialise concurrent runs (two CI jobs on one machine); re-check after getting the lock.
exec 9>"${DEST}/.lock"
flock 9
if installed_ok; then
    log "Jaeger ${JAEGER_VERSION} already installed: ${BIN}"
    exit 0
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/causaltrace-jaeger-build.XXXXXX")"
cleanup() {
    chmod -R u+w "${WORK}" 2>/dev/null || true
    rm -rf "${WORK}"
    rm -f "${BIN}.partial"
}
trap cleanup EXIT

log "$("${GO}" version); building Jaeger ${JAEGER_VERSION} (cold build: many minutes on 2 cores, ~340 modules)"
log "downloading module source ${MODULE}@${JAEGER_VERSION}"
# Run outside any module so the go.mod of the current directory does not interfere.
SRC_DIR="$(cd "${WORK}" && GO111MODULE=on GOFLAGS=-mod=mod "${GO}" mod download -json "${MODULE}@${JAEGER_VERSION}" \
    | sed -n 's/^[[:space:]]*"Dir":[[:space:]]*"\(.*\)",\{0,1\}$/\1/p')"
if [[ -z "${SRC_DIR}" || ! -d "${SRC_DIR}/cmd/jaeger" ]]; then
    log "ERROR: could not locate the module source of ${MODULE}@${JAEGER_VERSION} (got '${SRC_DIR}')"
    exit 1
fi

# The module cache is read-only; build in a writable copy.
cp -R "${SRC_DIR}" "${WORK}/src"
chmod -R u+w "${WORK}/src"

log "compiling ./cmd/jaeger (fetching its dependencies from the Go module proxy first if not cached)"
LDFLAGS="-s -w -X ${MODULE}/internal/version.latestVersion=${JAEGER_V2_VERSION}"
BUILD_LOG="${WORK}/build.log"
start=${SECONDS}
# GOTOOLCHAIN=auto (default) lets an older local Go fetch the go.mod toolchain via the proxy.
# The build's stderr (hundreds of "go: downloading" lines) goes to a log, shown only on failure.
if ! (cd "${WORK}/src" && GO111MODULE=on GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 \
        "${GO}" build -trimpath -ldflags "${LDFLAGS}" -o "${BIN}.partial" ./cmd/jaeger) >"${BUILD_LOG}" 2>&1; then
    log "ERROR: go build failed; last lines of its output:"
    tail -n 40 "${BUILD_LOG}" >&2
    exit 1
fi
log "compiled in $((SECONDS - start)) s ($(grep -c '^go: downloading ' "${BUILD_LOG}" || true) modules downloaded)"
cp "${WORK}/src/cmd/jaeger/internal/all-in-one.yaml" "${YAML}.partial"
mv -f "${YAML}.partial" "${YAML}"
mv -f "${BIN}.partial" "${BIN}"

if ! installed_ok; then
    log "ERROR: built ${BIN} but '${BIN} --help' fails"
    exit 1
fi
log "installed Jaeger ${JAEGER_VERSION} -> ${BIN} ($(du -h "${BIN}" | cut -f1)); config template ${YAML}"
