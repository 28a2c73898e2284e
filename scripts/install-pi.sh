#!/usr/bin/env bash
# Install toy-runtime as a system service on a Raspberry Pi (Raspberry Pi OS Bookworm 64-bit). See docs/raspberry-pi.md.
#
#   sudo scripts/install-pi.sh                      # from a checkout of the repo
#   sudo scripts/install-pi.sh --wheel toy_runtime-0.1.0-py3-none-any.whl
#   scripts/install-pi.sh --dry-run                 # print every action, change nothing
#
# Idempotent: every step checks first and acts only when something is missing or different, so a second run
# reports "nothing to do". toy.toml and secrets.env are created once and never overwritten.
#
# --prefix DIR puts /opt, /etc and /var/lib under DIR; with --skip-system (no apt, users, chown, systemctl) the
# tests run the whole file-level install for real in a temporary root.

set -euo pipefail
umask 022

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"

APT_PACKAGES=(
    python3 python3-venv python3-dev gcc          # the venv; gcc + headers build pyalsaaudio
    libportaudio2                                 # sounddevice (capture/playback)
    libjemalloc2                                  # the unit's malloc (LD_PRELOAD): less RSS while speaking
    libspeexdsp1                                  # the recognizer's echo canceller (adapters/speex_aec.py)
    alsa-utils libasound2-plugins libasound2-dev  # arecord/aplay/amixer, ALSA plugins, pyalsaaudio headers
    mosquitto mosquitto-clients                   # the local broker (skipped with --no-local-broker)
    curl ca-certificates                          # model downloads
    espeak-ng                                     # the Mandarin voice without the neural one (robotic, GPL-3)
)
SERVICE_USER=toy
SERVICE_GROUP=toy
DEVICE_GROUPS=(audio gpio dialout)                # must match SupplementaryGroups= in the unit
UNIT_NAME=toy-runtime.service

DRY_RUN=0
SKIP_SYSTEM=0
PREFIX=""
WHEEL=""
SOURCE_DIR="$REPO_DIR"
PYTHON=python3
MANIFEST="$SCRIPT_DIR/models.manifest"
ALLOW_UNVERIFIED=0
WITH_MODELS=1
WITH_BROKER=1
MQTT_PASSWORD_FILE=""
WITH_PACKAGE=1
START=0
EXTRAS=alsa
PIP_ARGS=()

CHANGES=0
DRY_RUN_FAILURES=0
WORK=""

usage() {
    cat <<'EOF'
usage: install-pi.sh [options]
  --dry-run             print every action it would take; change nothing
  --wheel PATH          install this wheel instead of the repo checkout
  --source DIR          repo checkout: the package (unless --wheel), configs/ and systemd/ (default: this repo)
  --python PY           interpreter for the venv (default: python3; needs >= 3.11)
  --extras LIST         package extras (default: alsa; "" for none)
  --pip-arg ARG         extra argument for pip install (repeatable)
  --manifest FILE       model manifest (default: scripts/models.manifest)
  --allow-unverified    accept manifest entries whose sha256 is UNVERIFIED (prints the hash to pin)
  --no-models           skip the model downloads
  --no-local-broker     skip the local mosquitto broker (toy.toml then needs a remote [mqtt] url)
  --mqtt-password-file FILE
                        this toy's own broker password, provisioned per toy (a fleet broker: docs/fleet.md);
                        written to secrets.env as TOY_MQTT__PASSWORD, never on a command line
  --no-package          skip pip install of the package (the venv is still created)
  --start               (re)start the service at the end
  --prefix DIR          install under DIR instead of / (needs --skip-system or --dry-run)
  --skip-system         no apt, groupadd/useradd, chown, systemctl (for tests and image builds)
  -h, --help            this help
EOF
}

log() { printf 'install-pi: %s\n' "$*"; }
ok() { printf '  ok: %s\n' "$*"; }
die() { printf 'install-pi: error: %s\n' "$*" >&2; exit 1; }

# A command line as a shell would accept it, quoting only the words that need it.
show() {
    local word out=()
    for word in "$@"; do
        if [[ "$word" =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then out+=("$word"); else out+=("$(printf '%q' "$word")"); fi
    done
    printf '%s' "${out[*]}"
}

# Every change goes through run: it counts the change and, in dry-run, only prints the command.
run() {
    CHANGES=$((CHANGES + 1))
    if ((DRY_RUN)); then
        printf '  [dry-run] %s\n' "$(show "$@")"
    else
        printf '  [run] %s\n' "$(show "$@")"
        "$@"
    fi
}

# A system step (apt, users, ownership, systemctl) that --skip-system leaves out.
run_system() {
    if ((SKIP_SYSTEM)); then
        printf '  [skip-system] %s\n' "$(show "$@")"
        return 0
    fi
    run "$@"
}

parse_args() {
    while (($#)); do
        case "$1" in
            --dry-run) DRY_RUN=1 ;;
            --skip-system) SKIP_SYSTEM=1 ;;
            --prefix) PREFIX="${2:?--prefix needs a directory}"; shift ;;
            --prefix=*) PREFIX="${1#*=}" ;;
            --wheel) WHEEL="${2:?--wheel needs a path}"; shift ;;
            --wheel=*) WHEEL="${1#*=}" ;;
            --source) SOURCE_DIR="${2:?--source needs a directory}"; shift ;;
            --source=*) SOURCE_DIR="${1#*=}" ;;
            --python) PYTHON="${2:?--python needs an interpreter}"; shift ;;
            --python=*) PYTHON="${1#*=}" ;;
            --extras) EXTRAS="${2?--extras needs a list}"; shift ;;
            --extras=*) EXTRAS="${1#*=}" ;;
            --pip-arg) PIP_ARGS+=("${2:?--pip-arg needs an argument}"); shift ;;
            --pip-arg=*) PIP_ARGS+=("${1#*=}") ;;
            --manifest) MANIFEST="${2:?--manifest needs a file}"; shift ;;
            --manifest=*) MANIFEST="${1#*=}" ;;
            --allow-unverified) ALLOW_UNVERIFIED=1 ;;
            --no-models) WITH_MODELS=0 ;;
            --no-local-broker) WITH_BROKER=0 ;;
            --mqtt-password-file) MQTT_PASSWORD_FILE="${2:?--mqtt-password-file needs a file}"; shift ;;
            --mqtt-password-file=*) MQTT_PASSWORD_FILE="${1#*=}" ;;
            --no-package) WITH_PACKAGE=0 ;;
            --start) START=1 ;;
            -h | --help) usage; exit 0 ;;
            *) usage >&2; die "unknown option: $1" ;;
        esac
        shift
    done
    PREFIX="${PREFIX%/}"
    if [[ -n "$PREFIX" ]] && ! ((SKIP_SYSTEM || DRY_RUN)); then
        die "--prefix needs --skip-system or --dry-run (users and systemctl would still act on this host)"
    fi
    OPT_DIR="$PREFIX/opt/toy-runtime"
    VENV="$OPT_DIR/venv"
    ETC_DIR="$PREFIX/etc/toy-runtime"
    STATE_DIR="$PREFIX/var/lib/toy-runtime"
    MODELS_DIR="$STATE_DIR/models"
    UNIT_DIR="$PREFIX/etc/systemd/system"
    MOSQ_DIR="$PREFIX/etc/mosquitto"
    ALSA_CONF_DIR="$PREFIX/etc/alsa/conf.d"
}

preflight() {
    if ! ((DRY_RUN || SKIP_SYSTEM)) && ((EUID != 0)); then
        die "run as root (sudo), or try --dry-run"
    fi
    [[ -f "$MANIFEST" ]] || ((!WITH_MODELS)) || die "model manifest not found: $MANIFEST"
    if [[ -n "$WHEEL" ]]; then
        [[ -f "$WHEEL" ]] || die "wheel not found: $WHEEL"
        WHEEL="$(cd "$(dirname "$WHEEL")" && pwd)/$(basename "$WHEEL")"
    else
        [[ -f "$SOURCE_DIR/pyproject.toml" ]] || die "not a toy-runtime checkout: $SOURCE_DIR"
    fi
    # configs/ and systemd/ come from the checkout even when the package comes from a wheel.
    local need
    for need in configs/toy.toml configs/mosquitto/acl systemd/$UNIT_NAME systemd/mosquitto-local.conf; do
        [[ -f "$SOURCE_DIR/$need" ]] || die "$SOURCE_DIR/$need is missing (--source must be a toy-runtime checkout)"
    done
    WORK="$(mktemp -d)"
    trap 'rm -rf "$WORK"' EXIT
    log "$( ((DRY_RUN)) && echo 'dry run: ' )installing under ${PREFIX:-/}"
}

# --- helpers ------------------------------------------------------------------------------------------------------------

# ensure_dir DIR MODE [OWNER:GROUP]
ensure_dir() {
    local dir="$1" mode="$2" owner="${3:-}"
    if [[ ! -d "$dir" ]]; then
        run install -d -m "$mode" "$dir"
    elif [[ "$(stat -c %a "$dir")" != "${mode#0}" ]]; then
        run chmod "$mode" "$dir"
    else
        ok "$dir"
    fi
    ensure_owner "$dir" "$owner"
}

# ensure_owner PATH [OWNER:GROUP] — a system step: skipped with --skip-system.
ensure_owner() {
    local path="$1" owner="${2:-}"
    [[ -n "$owner" ]] || return 0
    if ((SKIP_SYSTEM)); then return 0; fi
    if [[ ! -e "$path" ]] || [[ "$(stat -c %U:%G "$path")" != "$owner" ]]; then
        run_system chown "$owner" "$path"
    fi
}

# install_file SRC DEST MODE [OWNER:GROUP] — copy when missing or different; fix the mode. Returns 0 when it changed.
install_file() {
    local src="$1" dest="$2" mode="$3" owner="${4:-}" changed=1
    if [[ -f "$dest" ]] && cmp -s "$src" "$dest"; then
        if [[ "$(stat -c %a "$dest")" != "${mode#0}" ]]; then
            run chmod "$mode" "$dest"
        else
            ok "$dest"
        fi
    else
        run install -m "$mode" "$src" "$dest"
        changed=0
    fi
    ensure_owner "$dest" "$owner"
    return "$changed"
}

# install_if_absent SRC DEST MODE [OWNER:GROUP] — never overwrites local edits; enforces the mode.
install_if_absent() {
    local src="$1" dest="$2" mode="$3" owner="${4:-}"
    if [[ -e "$dest" ]]; then
        if [[ "$(stat -c %a "$dest")" != "${mode#0}" ]]; then
            run chmod "$mode" "$dest"
        else
            ok "$dest (kept as is)"
        fi
    else
        run install -m "$mode" "$src" "$dest"
    fi
    ensure_owner "$dest" "$owner"
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# A stable hash of what pip would install from a checkout (re-install only when the code changed).
source_hash() {
    (cd "$SOURCE_DIR" && find pyproject.toml toy_runtime firmware_bridge -type f \
        ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 2>/dev/null |
        sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
}

# --- steps --------------------------------------------------------------------------------------------------------------

step_apt() {
    log "apt packages"
    local missing=() pkg
    for pkg in "${APT_PACKAGES[@]}"; do
        if ((!WITH_BROKER)) && [[ "$pkg" == mosquitto* ]]; then continue; fi
        if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
            continue
        fi
        missing+=("$pkg")
    done
    if ((${#missing[@]} == 0)); then
        ok "all installed"
        return
    fi
    run_system apt-get update
    run_system env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
}

step_user() {
    log "user $SERVICE_USER and groups ${DEVICE_GROUPS[*]}"
    local group
    # A group named in SupplementaryGroups= that does not exist makes the unit fail (status=216/GROUP); `gpio`
    # exists on Raspberry Pi OS only, so it is created elsewhere.
    for group in "$SERVICE_GROUP" "${DEVICE_GROUPS[@]}"; do
        if getent group "$group" >/dev/null; then
            ok "group $group"
        else
            run_system groupadd --system "$group"
        fi
    done
    if id "$SERVICE_USER" >/dev/null 2>&1; then
        ok "user $SERVICE_USER"
        local have
        have=" $(id -nG "$SERVICE_USER") "
        for group in "${DEVICE_GROUPS[@]}"; do
            [[ "$have" == *" $group "* ]] || run_system usermod -a -G "$group" "$SERVICE_USER"
        done
    else
        local joined
        joined="$(IFS=,; echo "${DEVICE_GROUPS[*]}")"
        run_system useradd --system --gid "$SERVICE_GROUP" --groups "$joined" --home-dir /var/lib/toy-runtime \
            --no-create-home --shell /usr/sbin/nologin --comment "toy-runtime service" "$SERVICE_USER"
    fi
}

step_dirs() {
    log "directories"
    ensure_dir "$OPT_DIR" 0755
    ensure_dir "$ETC_DIR" 0755
    ensure_dir "$STATE_DIR" 0700 "$SERVICE_USER:$SERVICE_GROUP"
    # Models belong to root: the service reads them but cannot alter them.
    ensure_dir "$MODELS_DIR" 0755 root:root
}

step_venv() {
    log "venv $VENV"
    if [[ -x "$VENV/bin/python" ]]; then
        ok "$VENV"
        return
    fi
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null ||
        die "$PYTHON is missing or older than 3.11"
    run "$PYTHON" -m venv "$VENV"
}

step_package() {
    ((WITH_PACKAGE)) || { log "package: skipped (--no-package)"; return; }
    log "package"
    local stamp="$OPT_DIR/.package-sha256" want spec
    if [[ -n "$WHEEL" ]]; then
        want="wheel:$(sha256_of "$WHEEL")"
        spec="$WHEEL"
    else
        want="source:$(source_hash)"
        # pip builds in the source tree (build/, *.egg-info); build from a copy so the checkout stays clean.
        spec="$WORK/src"
        if ((!DRY_RUN)); then
            mkdir -p "$spec"
            (cd "$SOURCE_DIR" && cp -r pyproject.toml toy_runtime firmware_bridge "$spec/")
            if [[ -f "$SOURCE_DIR/README.md" ]]; then cp "$SOURCE_DIR/README.md" "$spec/"; fi
        fi
    fi
    if [[ -n "$EXTRAS" ]]; then spec="${spec}[${EXTRAS}]"; fi
    if [[ -f "$stamp" ]] && [[ "$(cat "$stamp")" == "$want" ]] && [[ -x "$VENV/bin/toy-runtime" ]]; then
        ok "toy-runtime is installed from this ${want%%:*}"
        return
    fi
    run "$VENV/bin/python" -m pip install --disable-pip-version-check --quiet "${PIP_ARGS[@]}" "$spec"
    if ((!DRY_RUN)); then
        [[ -x "$VENV/bin/toy-runtime" ]] || die "pip finished but $VENV/bin/toy-runtime is missing"
        printf '%s\n' "$want" >"$WORK/stamp"
    fi
    run install -m 0644 "$WORK/stamp" "$stamp"
}

# fetch_model DEST SHA256 URL — download, verify, install (unpack zips). Skips what is already in place.
fetch_model() {
    local dest="$1" want="$2" url="$3"
    local target="$MODELS_DIR/$dest" unverified=0
    if [[ "$want" == UNVERIFIED ]]; then
        if ((!ALLOW_UNVERIFIED)); then
            local why="$dest: the manifest has no verified sha256 (UNVERIFIED); re-run with --allow-unverified to accept the download and print its hash for the manifest"
            ((DRY_RUN)) || die "$why"
            printf '  [dry-run] WOULD FAIL: %s\n' "$why"
            DRY_RUN_FAILURES=$((DRY_RUN_FAILURES + 1))
            return 0
        fi
        unverified=1
    elif [[ ! "$want" =~ ^[0-9a-f]{64}$ ]]; then
        die "$dest: bad sha256 in the manifest: $want"
    fi

    if [[ "$dest" == *.zip ]]; then
        local unpacked="${target%.zip}" stamp="${target%.zip}/.source-sha256"
        if [[ -f "$stamp" ]] && { ((unverified)) || [[ "$(cat "$stamp")" == "$want" ]]; }; then
            ok "$unpacked"
            if ((unverified)); then
                log "  WARNING: $dest was accepted unverified; its sha256 was $(cat "$stamp") (pin it in the manifest)"
            fi
            return 0
        fi
    elif [[ -f "$target" ]]; then
        local have
        have="$(sha256_of "$target")"
        if ((unverified)) || [[ "$have" == "$want" ]]; then
            ok "$target"
            if ((unverified)); then
                log "  WARNING: $dest is unverified; its sha256 is $have (pin it in the manifest)"
            fi
            return 0
        fi
        log "  $target has sha256 $have, expected $want: downloading again"
    fi

    local tmp="$WORK/download"
    run curl --fail --location --retry 3 --silent --show-error --output "$tmp" "$url"
    if ((DRY_RUN)); then
        printf '  [dry-run] verify sha256 %s and install %s\n' "$want" "$target"
        return
    fi
    local got
    got="$(sha256_of "$tmp")"
    if ((unverified)); then
        log "  WARNING: $dest accepted UNVERIFIED; sha256 $got — check the model works, then pin this in $MANIFEST"
    elif [[ "$got" != "$want" ]]; then
        rm -f "$tmp"
        die "$dest: sha256 mismatch: got $got, expected $want (from $url); nothing installed"
    fi
    if [[ "$dest" == *.zip ]]; then
        local unpacked="${target%.zip}" stage="$WORK/unzip"
        rm -rf "$stage"
        mkdir -p "$stage"
        # Python's zipfile refuses absolute and ../ member names: nothing lands outside $stage.
        "$VENV/bin/python" -m zipfile -e "$tmp" "$stage"
        [[ -d "$stage/$(basename "$unpacked")" ]] ||
            die "$dest: the archive has no top-level directory $(basename "$unpacked")"
        printf '%s\n' "$got" >"$stage/$(basename "$unpacked")/.source-sha256"
        if [[ -e "$unpacked" ]]; then run rm -rf "$unpacked"; fi
        run mv "$stage/$(basename "$unpacked")" "$unpacked"
        run chmod -R u=rwX,go=rX "$unpacked"
    else
        run install -D -m 0644 "$tmp" "$target"
    fi
    rm -f "$tmp"
}

step_models() {
    ((WITH_MODELS)) || { log "models: skipped (--no-models)"; return; }
    log "models → $MODELS_DIR (manifest $MANIFEST)"
    local dest sha url extra line=0
    while read -r dest sha url extra || [[ -n "$dest" ]]; do
        line=$((line + 1))
        if [[ -z "$dest" || "$dest" == \#* ]]; then continue; fi
        [[ -n "$url" && -z "$extra" ]] || die "$MANIFEST:$line: expected 'DEST SHA256 URL'"
        [[ "$dest" != /* && "$dest" != *..* ]] || die "$MANIFEST:$line: DEST must stay inside the models dir"
        fetch_model "$dest" "$sha" "$url"
    done <"$MANIFEST"
}

# The zone the service reads by default ([session] timezone): this system's /etc/localtime (a unit has no TZ).
system_zone() {
    local link
    link="$(readlink -f /etc/localtime 2>/dev/null)" || link=""
    if [[ "$link" == */zoneinfo/* ]]; then
        printf '%s\n' "${link#*/zoneinfo/}"
    elif [[ -s /etc/timezone ]]; then
        head -n 1 /etc/timezone
    else
        printf 'UTC\n'
    fi
}

step_config() {
    log "configuration $ETC_DIR"
    log "  time zone $(system_zone): reminders use it unless toy.toml sets [session] timezone" \
        "(change it with: sudo timedatectl set-timezone Area/City)"
    install_if_absent "$SOURCE_DIR/configs/toy.toml" "$ETC_DIR/toy.toml" 0644 root:root
    cat >"$WORK/secrets.env" <<'EOF'
# toy-runtime secrets, read by systemd as EnvironmentFile= before it drops privileges. Keep root:root 0600.
# OPENAI_API_KEY=sk-...
# OPENAI_BASE_URL=https://api.openai.com/v1
EOF
    install_if_absent "$WORK/secrets.env" "$ETC_DIR/secrets.env" 0600 root:root
    [[ -z "$MQTT_PASSWORD_FILE" ]] || set_mqtt_password "$MQTT_PASSWORD_FILE" "$ETC_DIR/secrets.env"
}

# The toy's provisioned broker password into secrets.env (replacing an older one): read from a file, so it never
# appears on a command line or in this script's output.
set_mqtt_password() {
    local file="$1" secrets="$2" password
    [[ -r "$file" ]] || die "--mqtt-password-file: cannot read $file"
    IFS= read -r password <"$file" || [[ -n "$password" ]] || die "--mqtt-password-file: $file is empty"
    [[ -n "$password" ]] || die "--mqtt-password-file: $file is empty"
    if [[ -r "$secrets" ]] && grep -qxF "TOY_MQTT__PASSWORD=$password" "$secrets"; then
        ok "TOY_MQTT__PASSWORD (from $file) already in $secrets"
        return
    fi
    if ((DRY_RUN)); then
        printf '  [dry-run] write TOY_MQTT__PASSWORD from %s to %s\n' "$file" "$secrets"
        CHANGES=$((CHANGES + 1))
        return
    fi
    { grep -v '^TOY_MQTT__PASSWORD=' "$secrets" || true; printf 'TOY_MQTT__PASSWORD=%s\n' "$password"; } >"$WORK/secrets.new"
    run install -m 0600 "$WORK/secrets.new" "$secrets"
}

# The device id the local broker's user must match: from the installed toy.toml, else the shipped one.
device_id() {
    local file="$ETC_DIR/toy.toml"
    [[ -r "$file" ]] || file="$SOURCE_DIR/configs/toy.toml"
    "$PYTHON" - "$file" <<'EOF'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    print((tomllib.load(f).get("mqtt") or {}).get("device_id") or "toy1")
EOF
}

step_broker() {
    ((WITH_BROKER)) || { log "local broker: skipped (--no-local-broker)"; return; }
    log "local broker $MOSQ_DIR"
    ensure_dir "$MOSQ_DIR/conf.d" 0755
    local changed=0 user passwd="$MOSQ_DIR/toy-runtime.passwd" secrets="$ETC_DIR/secrets.env"
    install_file "$SOURCE_DIR/systemd/mosquitto-local.conf" "$MOSQ_DIR/conf.d/toy-runtime.conf" 0644 && changed=1
    install_file "$SOURCE_DIR/configs/mosquitto/acl" "$MOSQ_DIR/toy-runtime.acl" 0644 && changed=1
    user="$(device_id)"
    if [[ -f "$passwd" ]] && grep -q "^$user:" "$passwd"; then
        ok "broker user $user"
    else
        # Reuse a password already in secrets.env; else make one. The hash is made from a file (mosquitto_passwd
        # -U), so the password never appears on a command line.
        local password=""
        if [[ -r "$secrets" ]]; then
            password="$(sed -n 's/^TOY_MQTT__PASSWORD=//p' "$secrets" | tail -n 1)"
        fi
        if ((DRY_RUN)); then
            printf '  [dry-run] add broker user %s to %s (mosquitto_passwd -U) and its password to %s\n' "$user" "$passwd" "$secrets"
            CHANGES=$((CHANGES + 1))
        else
            command -v mosquitto_passwd >/dev/null || die "mosquitto_passwd not found (apt-get install mosquitto)"
            [[ -n "$password" ]] || password="$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')"
            printf '%s:%s\n' "$user" "$password" >"$WORK/passwd"
            mosquitto_passwd -U "$WORK/passwd"
            if [[ -f "$passwd" ]]; then
                cat "$passwd" "$WORK/passwd" >"$WORK/passwd.new"
            else
                cp "$WORK/passwd" "$WORK/passwd.new"
            fi
            run install -m 0600 "$WORK/passwd.new" "$passwd"
            if ! grep -q '^TOY_MQTT__PASSWORD=' "$secrets"; then
                cat "$secrets" >"$WORK/secrets.new"
                printf 'TOY_MQTT__PASSWORD=%s\n' "$password" >>"$WORK/secrets.new"
                run install -m 0600 "$WORK/secrets.new" "$secrets"
            fi
        fi
        changed=1
    fi
    # mosquitto drops privileges before it reads the password file: it must own it.
    ensure_owner "$passwd" mosquitto:mosquitto
    if ((changed)); then
        run_system systemctl enable mosquitto.service
        run_system systemctl restart mosquitto.service
    fi
}

step_alsa() {
    # configs/alsa/99-toy-runtime.conf says why: a device a toy never plays through, which costs 13.6 MB of RSS
    log "ALSA device overrides $ALSA_CONF_DIR"
    ensure_dir "$ALSA_CONF_DIR" 0755
    install_file "$SOURCE_DIR/configs/alsa/99-toy-runtime.conf" "$ALSA_CONF_DIR/99-toy-runtime.conf" 0644 || true
}

step_unit() {
    log "systemd unit $UNIT_DIR/$UNIT_NAME"
    ensure_dir "$UNIT_DIR" 0755
    local changed=0
    install_file "$SOURCE_DIR/systemd/$UNIT_NAME" "$UNIT_DIR/$UNIT_NAME" 0644 && changed=1
    if ((changed)); then run_system systemctl daemon-reload; fi
    if ((!SKIP_SYSTEM)) && systemctl is-enabled --quiet "$UNIT_NAME" 2>/dev/null; then
        ok "$UNIT_NAME enabled"
    else
        run_system systemctl enable "$UNIT_NAME"
    fi
    if ((START)); then
        if ((CHANGES > 0)) || ! systemctl is-active --quiet "$UNIT_NAME" 2>/dev/null; then
            run_system systemctl restart "$UNIT_NAME"
        fi
    fi
}

main() {
    parse_args "$@"
    preflight
    step_apt
    step_user
    step_dirs
    step_venv
    step_package
    step_models
    step_config
    step_broker
    step_alsa
    step_unit
    if ((DRY_RUN_FAILURES)); then
        log "dry run: $CHANGES action(s) would be taken, but $DRY_RUN_FAILURES step(s) would fail (see WOULD FAIL)"
        exit 1
    elif ((CHANGES == 0)); then
        log "nothing to do: everything is already in place"
    elif ((DRY_RUN)); then
        log "dry run: $CHANGES action(s) would be taken; nothing was changed"
    else
        log "done: $CHANGES change(s)"
        log "next: put OPENAI_API_KEY/OPENAI_BASE_URL in $ETC_DIR/secrets.env, check $ETC_DIR/toy.toml, then"
        log "      sudo systemctl start toy-runtime && journalctl -u toy-runtime -f"
    fi
}

main "$@"
