#!/usr/bin/env bash
# Configure nginx for building our module out of tree.
#   configure-nginx.sh BUILDDIR [NGINX_SRC]
# Without NGINX_SRC: Debian's nginx-dev (/usr/share/nginx/src, headers and
# configure scripts only) with the flags Debian's nginx was built with, so
# the dynamic module loads into the packaged nginx. With NGINX_SRC: a full
# source tree, configured with its defaults plus our module.
# NGX_LLM_SAN (environment): sanitizer flags for the module's compile and
# link (make test-asan); the nginx binary stays as it is and gets the
# runtime through LD_PRELOAD (docs/testing.md).
set -euo pipefail
builddir=$1
src=${2:-}
top=$(cd "$(dirname "$0")/.." && pwd)

if [ -z "$src" ]; then
    src=/usr/share/nginx/src
    [ -f "$src/conf_flags" ] || { echo "nginx-dev not installed: run make deps" >&2; exit 1; }
    cd "$src"
    . ./conf_flags
    flags=("${NGX_CONF_FLAGS[@]}")
else
    cd "$src"
    flags=(--with-compat --with-threads)
fi

if [ -n "${NGX_LLM_SAN:-}" ]; then
    flags+=(--with-cc-opt="$NGX_LLM_SAN" --with-ld-opt="$NGX_LLM_SAN")
fi

mkdir -p "$builddir"
echo "$src" > "$builddir/srcdir"
# the module compiles under nginx's own flags (-Wno-unused-parameter,
# -Werror), also when make exported its CFLAGS (the sanitizer build's)
env -u CFLAGS ./configure "${flags[@]}" --add-dynamic-module="$top" --builddir="$builddir" \
    > "$builddir/configure.log" 2>&1 || { tail -30 "$builddir/configure.log" >&2; exit 1; }
echo "nginx configured in $builddir (source: $src)"
