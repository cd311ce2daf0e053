#!/usr/bin/env bash
# Installs what `make test` needs beyond Go, each only when missing, so
# that `make test` alone passes on a fresh machine (CI runs it through
# .ci/run on a clean clone). Debian/Ubuntu packages via apt-get (with sudo
# when not root); npm packages, pinned, into the gitignored .ci/npm.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
updated=""
apt_install() {
  if [ -z "$updated" ]; then
    $SUDO apt-get update
    updated=1
  fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "$@"
}

# Headless Chromium for the dashboard test (api).
command -v chromium >/dev/null 2>&1 || apt_install chromium
chromium --version

# rdma-core's libibverbs headers: the ibverbs backend of the verbs side
# channel (peers/verbs, build tag ibverbs) is compiled by make vet (no
# RDMA device, so it never runs).
[ -e /usr/include/infiniband/verbs.h ] || apt_install libibverbs-dev

# qemu user-mode emulation for the arm64 kernel tests (make test-arm64).
command -v qemu-aarch64-static >/dev/null 2>&1 || apt_install qemu-user-static
qemu-aarch64-static --version | head -1

# Vulkan for the GPU backend's tests (runtime/gpu, STRATA_WANT_VULKAN):
# the loader, Mesa's lavapipe (a conformant Vulkan device on the CPU) and
# glslc (make shaders; TestShadersMatchSources).
if ! ldconfig -p | grep -q 'libvulkan\.so\.1' || ! ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 ||
   ! command -v glslc >/dev/null 2>&1; then
  apt_install libvulkan1 mesa-vulkan-drivers glslc
fi
glslc --version | sed -n 1p

# ip and tc (iproute2) for the soak's network namespaces, veth links,
# tbf shaping and link cuts (internal/soak; used when root).
{ command -v ip >/dev/null 2>&1 && command -v tc >/dev/null 2>&1; } || apt_install iproute2

# Pinned npm packages the tests read from .ci/npm/node_modules: the
# official OpenAI, Anthropic and Ollama clients for the API compatibility
# tests (api, cmd/strata), and node-llama-cpp, whose prebuilt CPU
# llama.cpp is the oracle for the forward pass (internal/llamacpp).
OPENAI_NODE=6.49.0
ANTHROPIC_SDK=1.14.0
OLLAMA_JS=0.6.4
NODE_LLAMA_CPP=3.22.1
command -v npm >/dev/null 2>&1 || apt_install nodejs npm
if ! grep -qs "\"version\": \"$OPENAI_NODE\"" .ci/npm/node_modules/openai/package.json ||
   ! grep -qs "\"version\": \"$ANTHROPIC_SDK\"" .ci/npm/node_modules/@anthropic-ai/sdk/package.json ||
   ! grep -qs "\"version\": \"$OLLAMA_JS\"" .ci/npm/node_modules/ollama/package.json ||
   ! grep -qs "\"version\": \"$NODE_LLAMA_CPP\"" .ci/npm/node_modules/node-llama-cpp/package.json; then
  npm install --prefix .ci/npm --no-save --no-audit --no-fund "openai@$OPENAI_NODE" "@anthropic-ai/sdk@$ANTHROPIC_SDK" \
    "ollama@$OLLAMA_JS" "node-llama-cpp@$NODE_LLAMA_CPP"
fi
node --version
