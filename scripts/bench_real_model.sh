#!/usr/bin/env bash
# Optional, never in CI: `toy-runtime bench modes` against a real local model (issue 17), for each model in turn,
# on the server that scripts/real_model.sh builds and fetches. One conversation at a time (a CPU server serves
# one request at a time); the runtime's own timeouts (first token 15 s, between chunks 8 s) so a wait the child
# would hear is a fault turn; a unique first line per conversation so cold and warm first calls are reported apart;
# prompt tokens counted by the server (a max_tokens=1 replay, since llama-cpp-python streams no usage); price 0.
#
#   scripts/bench_real_model.sh                          # both models, whole dataset once (hours on 2 cores)
#   MODELS=0.5b LIMIT=3 scripts/bench_real_model.sh      # a smoke run: 3 conversations, 0.5B only
#   REPEAT=2 OUT=bench-out/real scripts/bench_real_model.sh
#
# Environment: MODELS ("0.5b 1.5b"), LIMIT (all conversations), REPEAT (1), OUT (bench-out/real: one folder per
# model below it), PORT (8099), PYTHON (python3, the one with toy-runtime's dependencies), EXTRA (more
# `bench modes` flags, e.g. "--modes dual_agent --conditions enabled"); PREFIX, N_CTX, CHAT_FORMAT as in
# scripts/real_model.sh. It (re)starts the real_model.sh server for each model and stops it at the end.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
models="${MODELS:-0.5b 1.5b}"
out="${OUT:-bench-out/real}"
repeat="${REPEAT:-1}"
port="${PORT:-8099}"
python="${PYTHON:-python3}"
export PORT="$port"

"$here/scripts/real_model.sh" install
trap '"$here/scripts/real_model.sh" stop' EXIT INT TERM
for model in $models; do
    export MODEL="$model"
    "$here/scripts/real_model.sh" fetch >/dev/null
    "$here/scripts/real_model.sh" stop
    "$here/scripts/real_model.sh" serve
    alias="qwen2.5-coder-$model"
    args=(modes --base-url "http://127.0.0.1:$port/v1" --model "$alias" --repeat "$repeat" --concurrency 1
          --turn-timeout 300 --out "$out/$model")
    if [ -n "${LIMIT:-}" ]; then
        args+=(--limit "$LIMIT")
    fi
    # shellcheck disable=SC2206  # EXTRA is a list of flags on purpose
    args+=(${EXTRA:-})
    echo "bench: $model → $out/$model" >&2
    (cd "$here" && PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" "$python" -m toy_runtime.bench.cli "${args[@]}")
    cp "${PREFIX:-/opt/toy-llm}/run/server.log" "$out/$model/server.log" 2>/dev/null || true
    "$here/scripts/real_model.sh" stop
done
