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
use Test::More;

our $TODO;

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

my $venv = "$build/venv-openai";
my $python = "$venv/bin/python";
my $has_sdk = "import openai, sys; sys.exit(openai.__version__ != '$sdk_version')";

if (!-x $python || system($python, '-c', $has_sdk) != 0) {
    note("installing openai==$sdk_version from PyPI into $venv");
    system('python3', '-m', 'venv', $venv) == 0
        or BAIL_OUT("python3 -m venv $venv failed (Debian: python3-venv)");
    system("$venv/bin/pip", 'install', '--quiet', "openai==$sdk_version") == 0
        or BAIL_OUT("pip install openai==$sdk_version failed (PyPI reachable?)");
}
is(system($python, '-c', $has_sdk), 0, "venv has openai $sdk_version");

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
my $py_pid = open my $py, '-|', $python, "$FindBin::Bin/openai_sdk.py"
    or die "cannot run t/openai_sdk.py: $!";
# a hung server must not hang the suite: the whole script gets 5 minutes
local $SIG{ALRM} = sub { diag('openai_sdk.py timed out'); kill 'KILL', $py_pid };
alarm 300;

my ($plan, $ran, $in_todo) = (undef, 0, 0);
while (my $line = <$py>) {
    chomp $line;
    if ($line =~ /^(not )?ok \d+ - (.*?)(?: # TODO (.*))?$/) {
        my ($pass, $name, $todo) = (!defined $1, $2, $3);
        TODO: {
            local $TODO = $todo;
            ok($pass, $name);
        }
        $in_todo = defined $todo;
        $ran++;
    } elsif ($line =~ /^1\.\.(\d+)$/) {
        $plan = $1;
    } elsif ($line =~ /^#/) {
        # a known gap's details only with prove -v
        $in_todo ? note($line) : diag($line);
    } else {
        diag("openai_sdk.py: $line");
    }
}
close $py;
alarm 0;
ok(defined $plan && $plan == $ran, "openai_sdk.py ran its plan ($ran tests)");

is(nginx_cmd('-s', 'stop'), 0, 'stop');
ok(wait_gone(10, $master), 'nginx gone');

done_testing();
