#!/usr/bin/perl
# The official `openai` Python SDK's Responses API against a private nginx
# (issue 26): responses.create / .stream / .parse, a function-call round
# trip, store:false with the history resent, a Codex-shaped conversation,
# errors, a Qwen-template model. The checks live in t/responses_sdk.py,
# which prints TAP; each of its lines becomes one test here.
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
use Cwd qw(abs_path);


$ENV{TEST_NGINX_LOAD_MODULES}
    or BAIL_OUT('TEST_NGINX_LOAD_MODULES not set: run the suites with make t-nginx');
$ENV{TEST_NGINX_MODEL}
    or BAIL_OUT('TEST_NGINX_MODEL not set: run the suites with make t-nginx');

my $build = $ENV{TEST_NGINX_BUILD} || 'build';
$ENV{TEST_NGINX_FIXTURES}
    or BAIL_OUT('TEST_NGINX_FIXTURES not set: run the suites with make t-nginx');
my $sdk_version = $ENV{OPENAI_SDK_VERSION} || '3.57.0';


my $python = sdk_venv('openai', "openai==$sdk_version");

# --- nginx with SmolLM2 and the tiny Qwen2 -------------------------------------

my $binary = $ENV{TEST_NGINX_ENGINE} ? "binary $ENV{TEST_NGINX_ENGINE};" : '';
my $qwen = abs_path("$FindBin::Bin/data/models/hf-qwen2");

my $port = nginx_setup('responses-sdk', <<"EOF");
    llm_engine main {
        model \$MODEL;
        served_model_name smollm2;
        $binary
        max_model_len 2048;
        kv_cache_memory 256m;
    }
    llm_engine qwen {
        model $qwen;
        served_model_name qwen2;
        $binary
        max_model_len 512;
        kv_cache_memory 16m;
    }
    server {
        listen 127.0.0.1:\$PORT;
        location /v1/ { llm_api main; llm_responses_zone conv 4m 1h; }
        location /small/v1/ { llm_api main; llm_responses_zone small 32k 1h; }
        location /strict/v1/ { llm_api main; llm_responses_strict_tools on; }
        location /qwen/v1/ { llm_api qwen; }
        location = /healthz { llm_health main; }
    }
EOF

is(nginx_cmd(), 0, 'nginx starts');
my $master = master_pid();
ok(wait_healthy(60), 'engine ready');

# --- the SDK's checks, one test each ------------------------------------------

$ENV{NGX_LLM_BASE} = "http://127.0.0.1:$port";
$ENV{NGX_LLM_MASTER_PID} = $master;
$ENV{OPENAI_SDK_VERSION} = $sdk_version;
sdk_run($python, 'responses_sdk.py', timeout => 300);

is(nginx_cmd('-s', 'stop'), 0, 'stop');
ok(wait_gone(10, $master), 'nginx gone');

done_testing();
