#!/usr/bin/perl
# The official `openai` Python SDK against a private nginx (issue 4, item 8):
# chat and completions, streaming and not, stream_options.include_usage,
# logprobs, the async client, and the SDK's exception types for
# 400/404/429/503/504 and for an error event inside a stream. The checks
# live in t/openai_sdk.py, which prints TAP; each of its lines becomes one
# test here.
#
# The SDK comes from PyPI into a venv outside the source tree,
# $TEST_NGINX_BUILD/venv-openai (build/ is ignored by git), made once and
# reused while it holds the pinned version (OPENAI_SDK_VERSION overrides).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use NgxLlm::Harness;
use NgxLlm::Sdk;
use Test::More;

$ENV{TEST_NGINX_LOAD_MODULES}
    or BAIL_OUT('TEST_NGINX_LOAD_MODULES not set: run the suites with make t-nginx');
$ENV{TEST_NGINX_MODEL}
    or BAIL_OUT('TEST_NGINX_MODEL not set: run the suites with make t-nginx');

my $build = $ENV{TEST_NGINX_BUILD} || 'build';
$ENV{TEST_NGINX_FIXTURES}
    or BAIL_OUT('TEST_NGINX_FIXTURES not set: run the suites with make t-nginx');
my $stories = "$ENV{TEST_NGINX_FIXTURES}/models/tiny260K-q8_0.gguf";
my $sdk_version = $ENV{OPENAI_SDK_VERSION} || '3.57.0';

-f $stories or BAIL_OUT("no $stories: make deps makes it");

# --- the venv: made once, reused while it holds the pinned SDK ---------------

my $python = sdk_venv('openai', "openai==$sdk_version");

# a model nginx cannot use: its API answers 503 (t/020-api.t does the same)
my $bad = "$build/t/sdk-truncated.gguf";
if (!-f $bad) {
    system("mkdir -p $build/t && head -c 1000000 $ENV{TEST_NGINX_MODEL} > $bad") == 0
        or die "cannot write $bad";
}

# --- nginx with three engines ----------------------------------------------------

# the engine the build made (the module's compiled-in default otherwise)
my $binary = $ENV{TEST_NGINX_ENGINE} ? "binary $ENV{TEST_NGINX_ENGINE};" : '';

my $port = nginx_setup('openai-sdk', <<"EOF");
    llm_engine main {
        model \$MODEL;
        served_model_name smollm2;
        $binary
        max_model_len 2048;
        kv_cache_memory 256m;
    }
    llm_engine tiny {
        model $stories;
        $binary
        max_num_seqs 1;
        max_queued_requests 0;
        max_model_len 512;
        kv_cache_memory 16m;
    }
    llm_engine bad {
        model $bad;
        $binary
        ready_timeout 0;
    }
    llm_token_quota_zone \$http_authorization zone=sdk:64k;
    server {
        listen 127.0.0.1:\$PORT sndbuf=4k;
        location /v1/ { llm_api main; }
        location /quota/v1/ {
            llm_api main;
            llm_token_quota zone=sdk tokens=40 per=1d;
        }
        location /short/v1/ { llm_api main; llm_deadline 2s; }
        location /tiny/v1/ { llm_api tiny; llm_max_buffered 1k; }
        location /bad/v1/ { llm_api bad; }
        location = /healthz { llm_health main; }
    }
EOF

is(nginx_cmd(), 0, 'nginx starts');
my $master = master_pid();
ok(wait_healthy(60), 'engine ready');

# --- the SDK's checks, one test each ------------------------------------------

$ENV{NGX_LLM_BASE} = "http://127.0.0.1:$port";
$ENV{OPENAI_SDK_VERSION} = $sdk_version;
sdk_run($python, 'openai_sdk.py', timeout => 300);

is(nginx_cmd('-s', 'stop'), 0, 'stop');
ok(wait_gone(10, $master), 'nginx gone');

done_testing();
