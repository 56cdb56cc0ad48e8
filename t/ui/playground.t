#!/usr/bin/perl
# The playground page (conf.example/playground/index.html) in Debian's
# headless Chromium (make test-ui): nginx serves it beside the API, the
# page shows the model's facts from /v1/models and the health, a message
# typed into it streams a reply from SmolLM2 (seen growing while it
# streams), and the page shows the time to first token, the tokens and the
# decode rate; a request the API refuses shows its JSON error. The
# screenshot is build/t/playground/playground.png.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../lib";
use NgxLlm::Harness;
use Cwd qw(abs_path);
use JSON::PP;
use Test::More;

$ENV{TEST_NGINX_LOAD_MODULES}
    or BAIL_OUT('TEST_NGINX_LOAD_MODULES not set: run it with make test-ui');
system('command -v chromium >/dev/null 2>&1') == 0
    or BAIL_OUT("chromium not found: make test-ui installs Debian's "
                . 'chromium (tools/deps.sh --ui)');
# Debian's python3 (python3-websockets), not one earlier on PATH
my $python = '/usr/bin/python3';
system($python, '-c', 'import websockets') == 0
    or BAIL_OUT('python3-websockets not installed (tools/deps.sh --ui)');

my $repo = abs_path("$FindBin::Bin/../..");
my $page = "$repo/conf.example/playground/index.html";
my $port = nginx_setup('playground', <<"EOF", $ENV{TEST_NGINX_PORT} ? (port => $ENV{TEST_NGINX_PORT}) : ());
    llm_engine main {
        model \$MODEL;
        served_model_name smollm2;
        max_model_len 2048;
        kv_cache_memory 64m;
    }
    server {
        listen 127.0.0.1:\$PORT;
        location /v1/ { llm_api main; }
        location = /healthz { llm_health main; }
        location = /playground {
            alias        $page;
            default_type text/html;
        }
    }
EOF
my $dir = abs_path(NgxLlm::Harness::prefix());
my $shot = "$dir/playground.png";

END {
    nginx_cmd('-s', 'quit') if NgxLlm::Harness::master_pid();
}

is(nginx_cmd(), 0, 'nginx starts');
ok(wait_healthy(90), 'engine ready');

my ($st, $body) = http_get('/playground');
is($st, 200, 'GET /playground');
unlike($body, qr{(?:src|href)\s*=\s*["']?(?:https?:)?//}i,
       'the page loads nothing from elsewhere');

my $json = `$python $FindBin::Bin/playground.py http://127.0.0.1:$port/playground 'Name three colors.' $shot`;
is($?, 0, 'playground.py drove Chromium') or diag $json;
my $r = eval { decode_json($json) } // {};
my $pg = $r->{playground} // {};
note explain $r;

ok($r->{loaded}, 'the page read /v1/models');
like($r->{facts} // '', qr/id\s+smollm2/, 'facts: the served model name');
like($r->{facts} // '', qr/architecture\s+llama/, "facts: the model's architecture");
like($r->{facts} // '', qr/max_model_len\s+2048/, 'facts: max_model_len');
like($r->{health} // '', qr/health: ready/, 'the health badge says ready');

is($pg->{state}, 'done', 'the reply finished') or diag $pg->{error};
ok(length($pg->{text} // ''), 'the reply has text');
cmp_ok($r->{lengths_seen} // 0, '>', 2,
       'the reply was seen growing while it streamed');
cmp_ok($pg->{tokens} // 0, '>', 1, 'tokens counted');
cmp_ok($pg->{ttft_ms} // 0, '>', 0, 'time to first token measured');
cmp_ok($pg->{tps} // 0, '>', 0, 'decode rate measured');
like($pg->{finish} // '', qr/^(?:stop|length)$/, 'finish reason shown');
like($r->{stats} // '', qr/TTFT \d+ ms.*tokens \d+.*decode [\d.]+ tok\/s/s,
     'the stats line shows TTFT, tokens and tok/s');
my @msgs = @{ $r->{messages} // [] };
is(scalar @msgs, 2, 'two messages in the log');
like($msgs[0] // '', qr/^msg user: Name three colors\.$/, 'the user message');
is($msgs[1] // '', "msg assistant: " . ($pg->{text} // ''), 'the streamed reply shown');

my ($state, $error, $last, $disabled) = @{ $r->{refused} // [] };
is($state, 'error', 'a refused request: the page in error');
like($error // '', qr/^HTTP 400: decimal_above_max_value: Invalid 'temperature'/,
     "the API's JSON error shown");
is($last, 'msg error', 'as an error message in the log');
ok(defined $disabled && !$disabled, 'Send enabled again');

open my $f, '<:raw', $shot or die "$shot: $!";
read $f, my $sig, 8;
is($sig, "\x89PNG\r\n\x1a\n", "screenshot $shot");
diag "screenshot: $shot";

done_testing();
