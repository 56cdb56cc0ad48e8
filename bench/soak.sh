#!/usr/bin/env bash
# make soak: nginx and the engine on the default model under a mixed load
# for SOAK_SECS (600 by default) after a warm-up (SOAK_WARMUP, 60 s); the
# client (bench/soak_client.py) checks every reply, samples the engine's
# and the workers' RSS and descriptors, and at the end checks them flat
# and /metrics idle (docs/testing.md, "Soak").
#   BUILD=... MODEL=... [SOAK_SECS=600] [SOAK_PORT=8091] bench/soak.sh
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:?BUILD is not set (make soak sets it)}
model=${MODEL:?MODEL is not set (make soak sets it)}
secs=${SOAK_SECS:-600}
warmup=${SOAK_WARMUP:-60}
port=${SOAK_PORT:-8091}
nginx=${NGINX:-/usr/sbin/nginx}
dir=$build/soak

rm -rf "$dir" && mkdir -p "$dir/logs" "$dir/conf"
# a small KV pool (the warm-up fills it, with the prefix cache) and a
# short max_model_len (a too-long prompt costs little to refuse)
cat > "$dir/conf/nginx.conf" <<CONF
load_module $build/modules/ngx_http_llm_module.so;
worker_processes  2;
error_log  logs/error.log notice;
pid        logs/nginx.pid;
events { worker_connections 1024; }
http {
    access_log  off;
    llm_engine main {
        model              $model;
        served_model_name  smollm2;
        binary             $build/ngx_llm_engine;
        threads            2;
        max_num_seqs       16;
        max_model_len      1024;
        kv_cache_memory    64m;
        max_queued_requests 64;
    }
    server {
        listen  127.0.0.1:$port;
        location /v1/ { llm_api main; }
        location /deadline/v1/ { llm_api main; llm_deadline 300ms; }
        location = /healthz { llm_health main; }
        location = /metrics { llm_metrics; }
    }
}
CONF

"$nginx" -p "$dir/" -c conf/nginx.conf -e logs/error.log
trap '"$nginx" -p "$dir/" -c conf/nginx.conf -e logs/error.log -s quit || true' EXIT

engine=
for _ in $(seq 120); do
    h=$(curl -s "http://127.0.0.1:$port/healthz" || true)
    if [[ $h == *'"ready"'* ]]; then
        engine=$(sed -E 's/.*"engine_pid":([0-9]+).*/\1/' <<< "$h")
        break
    fi
    sleep 1
done
[ -n "$engine" ] || { echo "soak: the engine is not ready: $h" >&2; exit 1; }
master=$(cat "$dir/logs/nginx.pid")
pids="engine=$engine"
i=0
for w in $(cat /proc/"$master"/task/*/children); do
    i=$((i + 1)); pids="$pids,worker$i=$w"
done
echo "soak: ${secs} s after ${warmup} s of warm-up, 16 clients, port $port ($pids)"
rc=0
python3 "$top/bench/soak_client.py" --port "$port" --pids "$pids" \
    --secs "$secs" --warmup "$warmup" || rc=$?
if grep -E '\[(alert|emerg|crit)\]|signal 11|core dumped' "$dir/logs/error.log"; then
    echo "soak FAILED: see $dir/logs/error.log"; rc=1
fi
exit $rc
