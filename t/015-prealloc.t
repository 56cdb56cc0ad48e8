#!/usr/bin/perl
# Pre-allocation (docs/operations.md): the engine touches its KV pool, its
# workspaces and the ring before it says ready, so its resident memory
# (VmRSS) right after ready is what it holds under load: 32 concurrent
# streams that fill the pool move it by less than a tolerance. A plan the
# machine cannot hold (kv_cache_memory over MemAvailable) fails at start
# with one clear line, which health reports. Reads /proc, so a plain
# script (docs/testing.md).
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

my %port = $ENV{TEST_NGINX_SERVER_PORT}
           ? (port => $ENV{TEST_NGINX_SERVER_PORT}) : ();
# growth allowed between ready and the peak under load: what requests
# allocate and free (each sequence's sampler and token arrays, through
# malloc's heap), the quantized-activation buffer sized by the largest
# step (docs/operations.md, pre-allocation). Measured: +4.0% (177.8 MB
# after ready, 185.0 MB peak); the engine before pre-allocation: +31.8%
# (101.5 MB to 133.8 MB: pool, ring and logits touched by the load)
my $tolerance = 0.05;

sub conf {
    my ($kv, $prealloc) = @_;
    $prealloc //= '';
    return nginx_setup('prealloc', <<"EOF", %port);
    llm_engine main {
        model \$MODEL;
        served_model_name smol;
        kv_cache_memory $kv;
        max_num_seqs 32;
        max_model_len 1024;
        $prealloc
    }
    server {
        listen 127.0.0.1:\$PORT;
        location /v1/ { llm_api main; }
        location = /healthz { llm_health main; }
    }
EOF
}

sub rss_kb {
    my ($pid) = @_;
    open my $f, '<', "/proc/$pid/status" or return undef;
    while (<$f>) { return $1 if /^VmRSS:\s+(\d+) kB/ }
    return undef;
}

# --- flat from the first request --------------------------------------------

conf('24m');
is(nginx_cmd(), 0, 'nginx starts');
my $engine = wait_healthy(60);
ok($engine, 'the engine is ready');
sleep 0.5;
my $rss0 = rss_kb($engine);
ok($rss0, "VmRSS after ready: $rss0 kB");

# 32 streams of ~110-token prompts and 16 tokens each: 32 x 126 tokens of
# KV (2.8 MB a stream at 22.5 KiB a token) is more than the 24m pool, so
# every block is used and some sequences are preempted
my @streams;
for my $i (1 .. 32) {
    my $prompt = join(' ', map { "word$_ of stream $i" } 1 .. 25);
    push @streams, open_stream('POST', '/v1/completions',
        qq({"model":"smol","prompt":"$prompt","max_tokens":16,"stream":true,)
        . qq("ignore_eos":true,"temperature":0}));
}
my ($done, $peak) = (0, $rss0);
my $deadline = time + 300;
my @buf = ('') x @streams;
my @eof = (0) x @streams;
while ($done < @streams && time < $deadline) {
    for my $i (0 .. $#streams) {
        next if $eof[$i];
        my $n = sysread($streams[$i], my $b, 65536);
        if (defined $n && $n == 0) { $eof[$i] = 1; $done++; next }
        $buf[$i] .= $b if defined $n;
    }
    my $r = rss_kb($engine) // 0;
    $peak = $r if $r > $peak;
    sleep 0.01;
}
is($done, 32, 'all 32 streams ended');
diag(substr($buf[0], 0, 400)) unless $buf[0] =~ /\[DONE\]/;
is(scalar(grep { /^HTTP\/1\.1 200/ && /data: \[DONE\]/ } @buf), 32,
   'all 32 streams completed with [DONE]');
my $rss1 = rss_kb($engine);
my $growth = ($peak - $rss0) / $rss0;
cmp_ok($growth, '<', $tolerance,
       sprintf('VmRSS flat: %d kB after ready, peak %d kB under load, %d kB '
               . 'after (+%.2f%%, tolerance %.0f%%)', $rss0, $peak, $rss1,
               100 * $growth, 100 * $tolerance));
my ($st, $body) = http_get('/healthz');
is($st, 200, 'still healthy');
is(wait_healthy(5), $engine, 'the same engine');

nginx_cmd('-s', 'quit');
wait_gone(20, master_pid(), $engine);

# --- kv_cache_prealloc off: the pool is not resident at ready ----------------

conf('24m', 'kv_cache_prealloc off;');
is(nginx_cmd(), 0, 'nginx starts with kv_cache_prealloc off');
my $lazy = wait_healthy(60);
ok($lazy, 'the engine is ready');
sleep 0.5;
my $rss_off = rss_kb($lazy);
cmp_ok($rss0 - $rss_off, '>', 20 * 1024,
       "VmRSS after ready without pre-allocation: $rss_off kB, the 24m pool "
       . 'less than with it');
nginx_cmd('-s', 'quit');
wait_gone(20, master_pid(), $lazy);

# --- a plan the machine cannot hold fails at start, saying why ----------------

conf('10000g');
is(nginx_cmd(), 0, 'nginx starts (the engine checks its plan)');
my $reason;
$deadline = time + 30;
while (time < $deadline) {
    ($st, $body) = http_get('/healthz', 2);
    last if $st == 503 && $body =~ /memory plan/;
    sleep 0.1;
}
is($st, 503, 'health answers 503');
like($body, qr/memory plan does not fit: KV pool and workspace need \d+ bytes, (MemAvailable|the memory cgroup's limit) is \d+ bytes \(lower kv_cache_memory\)/,
     'with the reason');
my @lines = NgxLlm::Harness::log_lines(qr/\[error\].*memory plan does not fit/);
is(scalar @lines, 1, 'one clear [error] line in the log') or diag(@lines);
my $master = master_pid();
nginx_cmd('-s', 'quit');
ok(wait_gone(20, $master), 'nginx quits');

done_testing();
