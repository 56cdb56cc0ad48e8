#!/usr/bin/perl
# Constrained decoding clients can rely on (issue 23), through the official
# `openai` Python SDK: a named tool_choice makes one call, "required" 1..8
# valid calls or length with the finished ones, a cut reply keeps its
# finished calls (also streamed), compact JSON has no blank outside strings,
# a relaxed schema is named in x-llm-schema-relaxed and a strict one is
# refused naming keyword and pointer. The checks live in t/tools_sdk.py,
# which prints TAP; each of its lines becomes one test here.
#
# The venv is t/040's, $TEST_NGINX_BUILD/venv-openai (outside the source
# tree: build/ is ignored), with jsonschema added, pinned like openai
# (OPENAI_SDK_VERSION, JSONSCHEMA_VERSION override).
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
my $sdk_version = $ENV{OPENAI_SDK_VERSION} || '3.57.0';
my $js_version = $ENV{JSONSCHEMA_VERSION} || '4.26.0';

my $python = sdk_venv('openai', "openai==$sdk_version",
                     "jsonschema==$js_version");

my $binary = $ENV{TEST_NGINX_ENGINE} ? "binary $ENV{TEST_NGINX_ENGINE};" : '';

my $port = nginx_setup('tools-sdk', <<"EOF", port => $ENV{TEST_NGINX_PORT});
    llm_engine main {
        model \$MODEL;
        served_model_name smollm2;
        $binary
        max_model_len 2048;
        kv_cache_memory 256m;
    }
    server {
        listen 127.0.0.1:\$PORT;
        location /v1/ { llm_api main; }
        location /compact/v1/ { llm_api main; llm_json_whitespace compact; }
        location /two/v1/ { llm_api main; llm_max_tool_calls 2; }
        location = /healthz { llm_health main; }
        location = /metrics { llm_metrics; }
    }
EOF

is(nginx_cmd(), 0, 'nginx starts');
my $master = master_pid();
ok(wait_healthy(60), 'engine ready');

$ENV{NGX_LLM_BASE} = "http://127.0.0.1:$port";
sdk_run($python, 'tools_sdk.py', timeout => 600);

is(nginx_cmd('-s', 'stop'), 0, 'stop');
ok(wait_gone(10, $master), 'nginx gone');

done_testing();
