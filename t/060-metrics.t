#!/usr/bin/perl
# /metrics with two engines (a plain script: it watches counters move
# under load, docs/testing.md): the text format Prometheus parses (each
# family once, one series per engine), the Gateway API Inference
# Extension's gauges, and the phase, step, compute, memory and error
# series growing as they should. t/ops/prometheus.t runs promtool on it.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use NgxLlm::Harness;
use Test::More;
use Time::HiRes qw(sleep time);

$ENV{TEST_NGINX_LOAD_MODULES}
    or BAIL_OUT('TEST_NGINX_LOAD_MODULES not set: run the suites with make t-nginx');
$ENV{TEST_NGINX_FIXTURES}
    or BAIL_OUT('TEST_NGINX_FIXTURES not set: run the suites with make t-nginx');
my $stories = "$ENV{TEST_NGINX_FIXTURES}/models/tiny260K-q8_0.gguf";

nginx_setup('metrics', <<"EOF", $ENV{TEST_NGINX_PORT} ? (port => $ENV{TEST_NGINX_PORT}) : ());
    llm_engine main {
        model \$MODEL;
        served_model_name smollm2;
        max_model_len 2048;
        kv_cache_memory 64m;
        threads 2;
    }
    llm_engine tiny {
        model $stories;
        served_model_name "stories\\"260k";
        kv_cache_memory 8m;
        threads 1;
        max_num_seqs 1;
        max_queued_requests 0;
    }
    server {
        listen 127.0.0.1:\$PORT sndbuf=4k;
        location /v1/ { llm_api main; }
        location /tiny/v1/ { llm_api tiny; llm_max_buffered 1k; }
        location /slow/v1/ { llm_api main; llm_deadline 100ms; }
        location = /healthz { llm_health main; }
        location = /tiny/healthz { llm_health tiny; }
        location = /metrics { llm_metrics; }
    }
EOF

is(nginx_cmd(), 0, 'nginx starts');
ok(wait_healthy(60), 'engine main ready');
my $deadline = time + 30;
sleep 0.1 while time < $deadline && (http_get('/tiny/healthz'))[0] != 200;
is((http_get('/tiny/healthz'))[0], 200, 'engine tiny ready');
sleep 0.3;      # the engine samples memory and compute every 100 ms

# name{labels} value lines into { family => [ [name, labels, value] ] },
# failing on what Prometheus' text parser would refuse
sub scrape {
    my ($st, $body) = http_get('/metrics', 5);
    is($st, 200, '/metrics answers') or return {};
    my (%help, %type, %series, $family, @bad);
    for my $line (split /\n/, $body) {
        if ($line =~ /^# HELP (\S+) /) {
            $help{$1}++;
        } elsif ($line =~ /^# TYPE (\S+) (counter|gauge|histogram)$/) {
            $type{$1}++;
            $family = $1;
        } elsif ($line =~ /^([a-zA-Z_:][a-zA-Z0-9_:]*)\{((?:[a-z_]+="(?:[^"\\]|\\.)*",?)*)\} (\S+)$/) {
            my ($name, $labels, $v) = ($1, $2, $3);
            my $ok = defined $family
                && ($name eq $family
                    || ($type{$family} && $name =~ /^\Q$family\E_(bucket|count|sum)$/));
            push @bad, "$line (not in family " . ($family // '-') . ')' unless $ok;
            push @{$series{$family}}, [$name, $labels, $v] if $ok;
        } else {
            push @bad, $line;
        }
    }
    is_deeply(\@bad, [], 'every line is a sample of the family declared above it');
    is_deeply([grep { $help{$_} != 1 || ($type{$_} // 0) != 1 } keys %help], [],
              'each family has one HELP and one TYPE') if $_[0];
    return \%series;
}

# the one value of name whose labels match re
sub value {
    my ($m, $family, $name, $re) = @_;
    my @v = map { $_->[2] } grep { $_->[0] eq $name && $_->[1] =~ $re } @{$m->{$family} || []};
    return @v == 1 ? $v[0] : undef;
}

my $m = scrape(1);
my $main = qr/model_name="smollm2",engine="main"/;
my $tiny = qr/model_name="stories\\"260k",engine="tiny"/;

for my $f (sort keys %$m) {
    my @names = map { $_->[0] } @{$m->{$f}};
    my $per = grep { $_->[1] =~ /engine="main"/ } @{$m->{$f}};
    my $per_tiny = grep { $_->[1] =~ /engine="tiny"/ } @{$m->{$f}};
    next if $f =~ /^ngx_llm_device_memory/;     # cuda only
    ok($per > 0 && $per == $per_tiny, "$f: $per series for each engine");
}
ok(!exists $m->{ngx_llm_kv_blocks_total} && !exists $m->{ngx_llm_ring_slots_total},
   'no gauge named *_total');

# --- the Gateway API Inference Extension's four --------------------------------

for my $g ('vllm:num_requests_waiting', 'vllm:num_requests_running') {
    is(value($m, $g, $g, $main), 0, "$g idle");
}
my $usage = value($m, 'vllm:kv_cache_usage_perc', 'vllm:kv_cache_usage_perc', $main);
ok(defined $usage && $usage >= 0 && $usage <= 1, "kv_cache_usage_perc $usage in 0..1");
my $blocks = value($m, 'ngx_llm_kv_blocks_capacity', 'ngx_llm_kv_blocks_capacity', $main);
my $info = value($m, 'vllm:cache_config_info', 'vllm:cache_config_info',
                 qr/$main,block_size="16",num_gpu_blocks="$blocks"$/);
is($info, 1, "cache_config_info: block_size 16, num_gpu_blocks $blocks");

# --- memory --------------------------------------------------------------------

my $wb = value($m, 'ngx_llm_model_weights_bytes', 'ngx_llm_model_weights_bytes', $main);
cmp_ok($wb, '>', 50e6, "weights: $wb bytes");
my $kv = value($m, 'ngx_llm_kv_cache_reserved_bytes', 'ngx_llm_kv_cache_reserved_bytes', $main);
ok($kv > 60 * 2**20 && $kv <= 64 * 2**20, "KV reserved $kv bytes of kv_cache_memory 64m");
my $rss = value($m, 'ngx_llm_engine_resident_memory_bytes', 'ngx_llm_engine_resident_memory_bytes', $main);
cmp_ok($rss, '>', 10e6, "engine RSS $rss bytes");
is(value($m, 'ngx_llm_compute_threads', 'ngx_llm_compute_threads', $main), 2, 'compute threads 2');
is(value($m, 'ngx_llm_compute_threads', 'ngx_llm_compute_threads', $tiny), 1, 'tiny: compute threads 1');

# --- under load: phases, steps, compute time move --------------------------------

my $phase = 'ngx_llm_engine_phase_seconds_total';
my $it = 'vllm:iteration_tokens_total';
my %before = map { $_ => value($m, $phase, $phase, qr/$main,phase="$_"/) }
             qw(prefill decode mixed idle);
my $busy0 = value($m, 'ngx_llm_compute_busy_seconds_total', 'ngx_llm_compute_busy_seconds_total', $main);
my $used_mid;

my $s = open_stream('POST', '/v1/completions',
    '{"model":"smollm2","prompt":"Once upon a time","max_tokens":160,"ignore_eos":true,"stream":true}');
my ($body) = read_some($s, 60, qr/"text":"[^"]*".*"text":"[^"]*".*"text"/s);
$used_mid = metric('ngx_llm_kv_cache_used_bytes', 'engine="main"');
# utilisation is over the last second or more: poll while decoding
my ($util_mid, $until) = (0, time + 20);
while ($util_mid == 0 && time < $until) {
    sleep 0.2;
    $util_mid = metric('ngx_llm_compute_utilization', 'engine="main"') // 0;
}
my ($rest) = read_some($s, 300, qr/data: \[DONE\]/);
like(join('', map { $_->[1] } @$rest), qr/data: \[DONE\]/, 'the 160-token stream ended');
sleep 0.3;

$m = scrape(0);
my %after = map { $_ => value($m, $phase, $phase, qr/$main,phase="$_"/) }
            qw(prefill decode mixed idle);
cmp_ok($after{prefill}, '>', $before{prefill}, "prefill seconds grew: $before{prefill} -> $after{prefill}");
cmp_ok($after{decode} - $before{decode}, '>', 0.01, "decode seconds grew: $before{decode} -> $after{decode}");
cmp_ok($after{idle}, '>', $before{idle} + 0.2, "idle seconds grew: $before{idle} -> $after{idle}");
is($after{mixed}, $before{mixed}, 'one request alone: no mixed step');
my $busy1 = value($m, 'ngx_llm_compute_busy_seconds_total', 'ngx_llm_compute_busy_seconds_total', $main);
cmp_ok($busy1, '>', $busy0, "compute busy seconds grew: $busy0 -> $busy1");
ok(defined $util_mid && $util_mid > 0 && $util_mid <= 1, "utilisation during decode: $util_mid");
cmp_ok($used_mid, '>', 0, "KV in use mid-request: $used_mid bytes");

my $steps = value($m, 'ngx_llm_engine_steps_total', 'ngx_llm_engine_steps_total', $main);
my $count = value($m, $it, "${it}_count", $main);
my $sum = value($m, $it, "${it}_sum", $main);
is($count, $steps, "the tokens-per-step histogram counts every step ($steps)");
my $one = value($m, $it, "${it}_bucket", qr/$main,le="1\.0"/);
cmp_ok($one, '>=', 159, "$one steps of one token (the decodes)");
cmp_ok($sum, '>=', $count + 3, "tokens per step sum $sum: prompts fed in chunks");
my $tiny_count = value($m, $it, "${it}_count", $tiny);
is($tiny_count, value($m, 'ngx_llm_engine_steps_total', 'ngx_llm_engine_steps_total', $tiny),
   "tiny's histogram is its own ($tiny_count warm-up steps)");

# --- errors by type: a deadline is a timeout -------------------------------------

my $err = 'ngx_llm_request_errors_total';
my $t0 = value($m, $err, $err, qr/$main,type="timeout"/);
my ($st) = http_post('/slow/v1/completions',
    '{"model":"smollm2","prompt":"Once","max_tokens":500,"ignore_eos":true}', 30);
is($st, 504, 'a passed deadline answers 504');
# the log phase counts it just after the reply went out: on a loaded
# machine the client may read the 504 first
my $wait = time + 5;
do { $m = scrape(0) } while value($m, $err, $err, qr/$main,type="timeout"/) != $t0 + 1
                            && time < $wait && sleep 0.1;
is(value($m, $err, $err, qr/$main,type="timeout"/), $t0 + 1, 'timeout errors +1');
is(value($m, $err, $err, qr/$tiny,type="timeout"/), 0, "tiny's timeouts stay 0");

# the engine's own: tiny has one batch place and no queue; a stalled
# stream holds it (as in t/030), so the next request is refused
my $q0 = value($m, $err, $err, qr/$tiny,type="queue_full"/);
$s = open_stream('POST', '/tiny/v1/completions',
    '{"model":"stories\\"260k","stream":true,"prompt":"Once","max_tokens":500,"ignore_eos":true}',
    rcvbuf => 2048);
my ($reads) = read_some($s, 30, qr/data: \{/);
ok(scalar @$reads, 'a stalled stream holds tiny\'s one place');
sleep 0.3;
($st) = http_post('/tiny/v1/completions', '{"model":"stories\\"260k","prompt":"Once","max_tokens":2}', 10);
is($st, 429, 'the next request: 429');
$m = scrape(0);
is(value($m, $err, $err, qr/$tiny,type="queue_full"/), $q0 + 1, 'queue_full errors +1');
is(value($m, $err, $err, qr/$main,type="queue_full"/), 0, "main's stay 0");
close $s;

done_testing();

END { nginx_cmd('-s', 'quit') if master_pid() && alive(master_pid()); }
