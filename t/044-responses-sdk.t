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
use Test::More;
use Cwd qw(abs_path);

our $TODO;

$ENV{TEST_NGINX_LOAD_MODULES}
    or BAIL_OUT('TEST_NGINX_LOAD_MODULES not set: run the suites with make t-nginx');
$ENV{TEST_NGINX_MODEL}
    or BAIL_OUT('TEST_NGINX_MODEL not set: run the suites with make t-nginx');

my $build = $ENV{TEST_NGINX_BUILD} || 'build';
$ENV{TEST_NGINX_FIXTURES}
    or BAIL_OUT('TEST_NGINX_FIXTURES not set: run the suites with make t-nginx');
my $sdk_version = $ENV{OPENAI_SDK_VERSION} || '3.57.0';


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
my $py_pid = open my $py, '-|', $python, "$FindBin::Bin/responses_sdk.py"
    or die "cannot run t/responses_sdk.py: $!";
# a hung server must not hang the suite: the whole script gets 5 minutes
local $SIG{ALRM} = sub { diag('responses_sdk.py timed out'); kill 'KILL', $py_pid };
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
        diag("responses_sdk.py: $line");
    }
}
close $py;
alarm 0;
ok(defined $plan && $plan == $ran, "responses_sdk.py ran its plan ($ran tests)");

is(nginx_cmd('-s', 'stop'), 0, 'stop');
ok(wait_gone(10, $master), 'nginx gone');

done_testing();
