#!/usr/bin/env bash
# Mutation testing with mutmut on a COPY of the tree (docs/testing-mutation.md).
#
#   scripts/mutation.sh                      # events, agent, session, plugins, host
#   scripts/mutation.sh events               # one package under toy_runtime/
#   scripts/mutation.sh events/kernel.py session/gate.py   # single files
#
# mutmut 2.x rewrites the files it mutates in place, so it runs in a throwaway copy; the working tree is never
# touched. It runs one mutant at a time (the shared box has 2 cores). The tests are the fast ones that need no
# services (no broker, PulseAudio or browser). Env: MUTATION_DIR (keep the copy there, default a temp dir),
# MUTATION_TESTS (test paths to run instead), MUTATION_KEEP=1 (don't delete the copy, e.g. to run `mutmut show ID` in it afterwards).
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(events agent session plugins host)

if ! python -c "import mutmut" 2>/dev/null; then
    echo "mutation.sh: mutmut is not installed; pip install -e '.[mutation]'" >&2
    exit 2
fi

paths=()
for t in "${targets[@]}"; do
    p="toy_runtime/${t#toy_runtime/}"
    if [ ! -e "$repo/$p" ]; then
        echo "mutation.sh: no such package or file: $p" >&2
        exit 2
    fi
    paths+=("$p")
done

work="${MUTATION_DIR:-$(mktemp -d -t toy-mutation.XXXXXX)}"
mkdir -p "$work"
cleanup() { [ "${MUTATION_KEEP:-0}" = 1 ] || rm -rf "$work"; }
trap cleanup EXIT
# Copy the tracked files plus uncommitted edits, not caches or a previous run's .mutmut-cache.
(cd "$repo" && git ls-files -z --cached --others --exclude-standard) \
    | (cd "$repo" && xargs -0 cp --parents -t "$work" 2>/dev/null || true)
cd "$work"

# PYTHONPATH=. makes the copy (with the mutant) win over the editable install of the main checkout.
# MUTATION_TESTS narrows the test command (the full fast set takes ~2 min per surviving mutant on the 2-core box).
tests="${MUTATION_TESTS:-tests/conversation tests/kernel tests/agent tests/plugins tests/host}"
runner="env PYTHONPATH=$work python -m pytest -x -q -p no:cacheprovider -p no:randomly $tests"
echo "mutation.sh: mutating ${paths[*]} in $work" >&2
status=0
python -m mutmut run --paths-to-mutate "$(IFS=,; echo "${paths[*]}")" --tests-dir tests \
    --runner "$runner" --no-progress --simple-output || status=$?
python -m mutmut results || true
# Per-file score: killed/total.
python - <<'PY'
import collections

from mutmut.cache import Mutant, db_session, init_db
from pony.orm import select


@init_db
@db_session
def scores():
    totals, killed = collections.Counter(), collections.Counter()
    for m in select(m for m in Mutant):
        name = m.line.sourcefile.filename
        totals[name] += 1
        killed[name] += m.status == "ok_killed"
    for name in sorted(totals):
        print(f"score {name}: {killed[name]}/{totals[name]} killed")


scores()
PY
# mutmut's exit code is a bit set (2 survivors, 4 timeouts...); 1 is a real failure.
[ $((status & 1)) -eq 0 ] || exit 1
exit 0
