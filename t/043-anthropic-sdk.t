#!/usr/bin/perl
# The official `anthropic` Python SDK against a private nginx (issue 27):
# messages.create, messages.stream, a tool_use / tool_result round trip,
# count_tokens, thinking blocks, a Claude-Code-shaped beta request and the
# SDK's exception types. The checks live in t/anthropic_sdk.py, which
# prints TAP; each of its lines becomes one test here.
#
# The SDK comes from PyPI into a venv outside the source tree,
# $TEST_NGINX_BUILD/venv-anthropic (build/ is ignored by git), made once
# and reused while it holds the pinned version (ANTHROPIC_SDK_VERSION
# overrides).
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
my $sdk_version = $ENV{ANTHROPIC_SDK_VERSION} || '2.17.0';

my $python = sdk_venv('anthropic', "anthropic==$sdk_version");

# --- nginx: SmolLM2, and the same under llm_reasoning with a template that
# opens <think> (t/027-tools.t's) ---------------------------------------------

my $binary = $ENV{TEST_NGINX_ENGINE} ? "binary $ENV{TEST_NGINX_ENGINE};" : '';
my $think = "$build/t/anthropic-think.jinja";
system("mkdir -p $build/t") == 0 or die "cannot make $build/t";
open my $fh, '>', $think or die "cannot write $think";
print $fh "{%- for m in messages %}{{- '<|im_start|>' + m.role + '\\n' "
          . "+ m.content + '<|im_end|>\\n' }}{%- endfor %}"
          . "{{- '<|im_start|>assistant\\n<think>\\n' }}";
close $fh;

my $port = nginx_setup('anthropic-sdk', <<"EOF");
    llm_engine main {
        model \$MODEL;
        served_model_name smollm2;
        $binary
        max_model_len 2048;
        kv_cache_memory 256m;
    }
    llm_engine think {
        model \$MODEL;
        served_model_name smollm2;
        $binary
        max_model_len 2048;
        kv_cache_memory 64m;
        chat_template $think;
    }
    server {
        listen 127.0.0.1:\$PORT;
        location /v1/ { llm_api main; }
        location /think/v1/ { llm_api think; llm_reasoning on; }
        location = /healthz { llm_health main; }
    }
EOF

is(nginx_cmd(), 0, 'nginx starts');
my $master = master_pid();
ok(wait_healthy(60), 'engine ready');

# --- the SDK's checks, one test each ------------------------------------------

$ENV{NGX_LLM_BASE} = "http://127.0.0.1:$port";
sdk_run($python, 'anthropic_sdk.py', timeout => 300);

is(nginx_cmd('-s', 'stop'), 0, 'stop');
ok(wait_gone(10, $master), 'nginx gone');

done_testing();
