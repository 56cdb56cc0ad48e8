#!/usr/bin/perl
# Streams under real conditions (a plain script: it sends signals and
# watches time, docs/testing.md): tokens arrive spread over time, a
# client that leaves has its sequence dropped and its KV freed, a stalled
# client holds only its own sequence, a killed engine ends streams with an
# error event at once, a reload lets streams finish, a full queue is 429.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use NgxLlm::Harness;
use Test::More;
use Time::HiRes qw(sleep time);

$ENV{TEST_NGINX_LOAD_MODULES}
    or BAIL_OUT('TEST_NGINX_LOAD_MODULES not set: run the suites with make t-nginx');
$ENV{TEST_NGINX_MODEL}
    or BAIL_OUT('TEST_NGINX_MODEL not set: run the suites with make t-nginx');
$ENV{TEST_NGINX_FIXTURES}
    or BAIL_OUT('TEST_NGINX_FIXTURES not set: run the suites with make t-nginx');
my $stories = "$ENV{TEST_NGINX_FIXTURES}/models/tiny260K-q8_0.gguf";

nginx_setup('stream', <<'EOF');
    llm_engine main {
        model $MODEL;
        served_model_name smollm2;
        max_model_len 2048;
        kv_cache_memory 256m;
    }
    server {
        listen 127.0.0.1:$PORT sndbuf=4k;
        location /v1/ { llm_api main; llm_max_buffered 1k; }
        location = /healthz { llm_health main; }
        location = /metrics { llm_metrics; }
    }
EOF

is(nginx_cmd(), 0, 'nginx starts');
my $master = master_pid();
ok(wait_healthy(60), 'engine ready');

my $long = '{"model":"smollm2","stream":true,"prompt":"Once upon a time",'
         . '"max_tokens":%d,"ignore_eos":true,"temperature":0}';

# --- tokens arrive one by one, spread over time ------------------------------

my $s = open_stream('POST', '/v1/completions', sprintf($long, 48));
my ($reads, $eof) = read_some($s, 60, qr/data: \[DONE\]/);
my $body = join '', map { $_->[1] } @$reads;
my @chunks = $body =~ /^data: \{/mg;
is(scalar @chunks, 49, '48 token chunks and the final one');
like($body, qr/data: \[DONE\]\n\n$/, 'stream ends with [DONE]');
my @with_data = grep { $_->[1] =~ /data: \{/ } @$reads;
cmp_ok(scalar @with_data, '>=', 8, scalar(@with_data) . ' separate reads carried chunks');
my $spread = $with_data[-1][0] - $with_data[0][0];
cmp_ok($spread, '>', 0.05, sprintf('first to last chunk: %.3f s, not one burst', $spread));

# --- a client that leaves: the engine drops the sequence within a step ---------

my $gen0 = metric('vllm:generation_tokens_total');
$s = open_stream('POST', '/v1/completions', sprintf($long, 1500));
($reads) = read_some($s, 60, qr/(?:data: \{.*){3}/s);
ok(@$reads, 'stream started');
close $s;
my $deadline = time + 10;
sleep 0.1 while time < $deadline
                && (metric('vllm:num_requests_running') // 1) != 0;
is(metric('vllm:num_requests_running'), 0, 'no sequence runs after the client left');
my $gen1 = metric('vllm:generation_tokens_total');
sleep 0.5;
is(metric('vllm:generation_tokens_total'), $gen1, 'no token computed for it afterwards');
cmp_ok($gen1 - $gen0, '<', 1500, ($gen1 - $gen0) . ' of 1500 tokens were computed');
is(metric('ngx_llm_cancelled_total'), 1, 'the engine counted the cancel');
is(metric('ngx_llm_kv_blocks_capacity') > 0
   && metric('vllm:kv_cache_usage_perc') + 0 == 0, 1, 'its KV blocks are free again');
is(metric('ngx_llm_ring_slots_used'), 0, 'its ring slot is free again');

# --- a stalled client holds its own sequence, not the engine ---------------------

$s = open_stream('POST', '/v1/completions', sprintf($long, 600), rcvbuf => 2048);
sleep 1;
my ($st2, $b2) = http_post('/v1/completions',
    '{"model":"smollm2","prompt":"Hello","max_tokens":3,"ignore_eos":true}', 60);
is($st2, 200, 'another request is served while the first client stalls');

# its socket, nginx's 1k and the ring's 256 tokens fill up, then it waits
my ($g_prev, $g_now, $held) = (-1, 0, 0);
$deadline = time + 90;
while (time < $deadline) {
    $g_now = metric('vllm:generation_tokens_total');
    if ($g_now == $g_prev) { $held = 1; last }
    $g_prev = $g_now;
    sleep 1.5;
}
ok($held, "the stalled stream stopped generating at $g_now tokens (held, not dropped)");
is(metric('vllm:num_requests_running'), 1, 'and keeps its place');
my ($rest, $eof3) = read_all($s, 180);
my @all = $rest =~ /^data: \{"id[^\n]*"text":/mg;
is(scalar @all, 601, 'once it reads, it gets all 600 tokens and the end')
    or diag substr($rest, -300);
like($rest, qr/"finish_reason":"length"\}\]\}\n\ndata: \[DONE\]\n\n$/s, 'and [DONE]');

# --- engine killed mid-stream: a final error event at once ----------------------

$s = open_stream('POST', '/v1/completions', sprintf($long, 1500));
($reads) = read_some($s, 60, qr/(?:data: \{.*){2}/s);
my ($engine) = engines($master);
my $t_kill = time;
kill 'KILL', $engine;
($rest, $eof) = read_all($s, 10);
my $took = time - $t_kill;
like($rest, qr/data: \{"error":\{"message":"engine exited","type":"server_error","param":null,"code":"engine_unavailable"\}\}\n\ndata: \[DONE\]\n\n/,
     'the stream ends with an error event and [DONE]');
ok($eof, 'and closes');
cmp_ok($took, '<', 1, sprintf('at once (%.3f s)', $took));
ok(wait_healthy(60, $engine), 'a new engine serves');

# --- reload under a streaming load: every stream completes --------------------

my @streams = map { open_stream('POST', '/v1/completions', sprintf($long, 48)) } 1 .. 4;
my @got = map { my ($r) = read_some($_, 60, qr/(?:data: \{.*){2}/s);
                join '', map { $_->[1] } @$r } @streams;
my ($engine_before) = engines($master);
is(nginx_cmd('-s', 'reload'), 0, 'reload while 4 streams run');
for my $i (0 .. 3) {
    my ($rest) = read_all($streams[$i], 120);
    my $whole = $got[$i] . $rest;
    my @tok = $whole =~ /^data: \{"id[^\n]*"text":/mg;
    is(scalar @tok, 49, "stream $i: all 48 tokens and the final chunk arrived");
    like($whole, qr/"finish_reason":"length"\}\]\}\n\ndata: \[DONE\]\n\n$/,
         "stream $i: finished normally, no error");
}
my ($engine_after) = engines($master);
is($engine_after, $engine_before, 'the same engine serves after the reload');

# --- a corrupted ring fails the request, never a process ------------------------

# the workers serving now (those the reload retired may still be exiting)
sub live_workers {
    return sort grep { $_ != $master }
           map { /^\s*(\d+) (?!.*shutting down)/ ? $1 : () }
           `ps -o pid=,args= --ppid $master`;
}
my @workers_before = live_workers();
$s = open_stream('POST', '/v1/completions', sprintf($long, 1500));
($reads) = read_some($s, 60, qr/(?:data: \{.*){2}/s);
my ($engine_now) = engines($master);
my $poked = `$ENV{TEST_NGINX_BUILD}/t/ring_poke $engine_now head`;
like($poked, qr/^[1-9]/, 'a peer scribbled over the running slot\'s stream index');
($rest, $eof) = read_all($s, 10);
like($rest, qr/data: \{"error":\{"message":"corrupt stream from the engine","type":"server_error","param":null,"code":"engine_error"\}\}\n\ndata: \[DONE\]\n\n/,
     'the request ends with an error event');
my @workers_after = live_workers();
is_deeply(\@workers_after, \@workers_before, 'no worker died');
is((engines($master))[0], $engine_now, 'the engine is the same process');
my ($st5, $b5) = http_post('/v1/completions',
    '{"model":"smollm2","prompt":"Hello","max_tokens":2,"ignore_eos":true}', 60);
is($st5, 200, 'the next request is served');
open my $elog, '<', NgxLlm::Harness::prefix() . '/logs/error.log' or die $!;
my @elog = <$elog>;
ok(scalar(grep { /\[alert\].*llm: corrupt stream in ring slot \d+/ } @elog),
   'one alert line says what happened');
is(scalar(grep { /exited on signal/ } @elog), 0, 'no process crashed');

is(nginx_cmd('-s', 'quit'), 0, 'quit');
ok(wait_gone(10, $master), 'nginx gone');

# --- a full queue is 429 with Retry-After -----------------------------------------

nginx_setup('stream-429', <<'EOF', model => $stories);
    llm_engine tiny {
        model $MODEL;
        max_num_seqs 1;
        max_queued_requests 0;
        max_model_len 512;
        kv_cache_memory 16m;
    }
    server {
        listen 127.0.0.1:$PORT sndbuf=4k;
        location /v1/ { llm_api tiny; llm_max_buffered 1k; }
        location = /healthz { llm_health tiny; }
    }
EOF
is(nginx_cmd(), 0, 'nginx with a one-sequence, no-queue engine');
$master = master_pid();
ok(wait_healthy(60), 'ready');
$s = open_stream('POST', '/v1/completions',
    '{"model":"tiny","stream":true,"prompt":"Once upon a time","max_tokens":500,'
    . '"ignore_eos":true,"stream_options":{"include_usage":true}}', rcvbuf => 2048);
# the stream runs once a token arrived; unread, it stalls and keeps its
# sequence: socket buffers (~90 events), 1k in nginx and one ring's worth
# (256) of tokens are fewer than 500
($reads) = read_some($s, 30, qr/data: \{/);
ok(scalar @$reads, 'the first stream runs');
sleep 0.3;
my (undef, undef, $r429) = http_post('/v1/completions',
    '{"model":"tiny","prompt":"Once","max_tokens":2}', 10);
like($r429, qr{^HTTP/1\.1 429 }, 'a second request gets 429');
like($r429, qr{\r\nRetry-After: 1\r\n}, 'with Retry-After');
like($r429, qr{"type":"rate_limit_error","param":null,"code":"queue_full"}, 'OpenAI error');
# read in small steps: the worker takes 1k at a time from the ring
($rest, $eof) = read_all($s, 60);
my $whole = join('', map { $_->[1] } @$reads) . $rest;
like($whole, qr/"finish_reason":"length"\}\]\}\n\n/, 'the stalled stream then ends normally');
like($whole, qr/"usage":\{"prompt_tokens":\d+,"completion_tokens":500,[^\n]*\n\ndata: \[DONE\]\n\n$/,
     'after all 500 tokens');
close $s;
is(nginx_cmd('-s', 'stop'), 0, 'stop');
ok(wait_gone(10, $master), 'nginx gone');

done_testing();
