#!/usr/bin/perl
# Resident memory of a loaded model (issue 25 item 2): the weights an
# engine holds are within 5% of its file and of the memory plan's weights
# (`ngx_llm_engine plan`, the "memory plan" line at start), for the default
# model and the files our quantizer makes from it (llama.cpp's mixes: Q5_0,
# Q5_1, IQ4_NL, Q2_K..Q6_K, IQ4_XS, Q8_0 tensors). Reads /proc, so a plain
# script (docs/testing.md).
#
# Weights resident, after requests have run through every layer and
# looked up 384 embedding rows spread over the vocabulary: the
# engine's resident pages (/proc/PID/smaps) of the model file's mapping,
# of its anonymous memory (heap, packed weights, KV pool, workspaces) and
# of the ring (a shared memfd), less the KV pool and the workspace as the
# memory plan line states them (the plan counts the ring in the
# workspace; the engine touches all three before it says ready,
# t/015-prealloc.t), less what an engine process holds whatever its model:
# the same measure of an engine serving tiny260K (1 MB of weights) beside
# them, less its plan's weights (a build with CUDA links the CUDA
# libraries, whose start takes about 95 MB of anonymous memory; without
# it, about 1 MB). What is left over besides weights (the tokenizer, the
# chat template) counts against the 5%.
# Packing that kept the file's pages beside its packed copy (about +30%),
# a dequantized copy (x4 or more), or a plan that counted another type's
# bytes fails.
use strict;
use warnings;

use Cwd qw(abs_path);
use FindBin;
use lib "$FindBin::Bin/lib";
use NgxLlm::Harness;
use Test::More;
use Time::HiRes qw(sleep);

$ENV{TEST_NGINX_LOAD_MODULES}
    or BAIL_OUT('TEST_NGINX_LOAD_MODULES not set: run the suites with make t-nginx');
$ENV{TEST_NGINX_MODEL}
    or BAIL_OUT('TEST_NGINX_MODEL not set: run the suites with make t-nginx');
$ENV{TEST_NGINX_ENGINE}
    or BAIL_OUT('TEST_NGINX_ENGINE not set: run the suites with make t-nginx');

my $limit = 0.05;
my $build = $ENV{TEST_NGINX_BUILD} || 'build';
my $dir = "$build/t/resident";
system('mkdir', '-p', $dir) == 0 or die;

my %file = (q4_1 => abs_path($ENV{TEST_NGINX_MODEL}));
for my $mix (qw(Q4_K_M Q5_K_M Q6_K Q8_0 IQ4_XS Q3_K_M Q2_K)) {
    my $out = "$dir/smollm2-$mix.gguf";
    is(system("$ENV{TEST_NGINX_ENGINE} quantize $ENV{TEST_NGINX_MODEL} $out "
              . "$mix > $dir/quantize-$mix.log 2>&1"), 0, "$mix: quantized");
    $file{lc $mix} = abs_path($out);
}
my @names = sort keys %file;
$ENV{TEST_NGINX_FIXTURES}
    or BAIL_OUT('TEST_NGINX_FIXTURES not set: run the suites with make t-nginx');
$file{base} = abs_path("$ENV{TEST_NGINX_FIXTURES}/models/tiny260K-f32.gguf");
-f $file{base} or BAIL_OUT("no $file{base}: make deps makes it");

# all engines at once; one request each, in turn
my $engines = join '', map { <<"EOF" } @names, 'base';
    llm_engine $_ {
        model $file{$_};
        served_model_name smollm2;
        max_model_len 512;
        kv_cache_memory 16m;
        max_num_seqs 4;
        threads 1;
    }
EOF
my $locations = join '', map { "        location /$_/ { llm_api $_; }\n" }
                           @names, 'base';
nginx_setup('resident-nginx', <<"EOF", $ENV{TEST_NGINX_RESIDENT_PORT} ? (port => $ENV{TEST_NGINX_RESIDENT_PORT}) : ());
$engines
    server {
        listen 127.0.0.1:\$PORT;
$locations
        location = /healthz { llm_health q4_1; }
    }
EOF
is(nginx_cmd(), 0, 'nginx starts');
ok(wait_healthy(120), 'an engine is ready');

# this nginx's engine serving this file (its command line names both:
# other suites may serve the default model at the same time)
my $master = master_pid();
ok($master, 'the master pid');
sub engine_of {
    my ($path) = @_;
    opendir my $d, '/proc' or die $!;
    for my $pid (grep { /^\d+$/ } readdir $d) {
        open my $f, '<', "/proc/$pid/cmdline" or next;
        my $cmd = do { local $/; <$f> } // '';
        return $pid if $cmd =~ /^ngx_llm_engine\0serve\0/
                       && $cmd =~ /\Q$path\E\0/ && $cmd =~ m{ngx_llm/$master/};
    }
    return undef;
}

# resident kB of the model file's mapping, and of the rest that is not a
# file (anonymous, heap, stacks, the ring's memfd)
sub resident {
    my ($pid, $path) = @_;
    open my $f, '<', "/proc/$pid/smaps" or return;
    my ($map, $model, $anon) = ('', 0, 0);
    while (<$f>) {
        if (/^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/) {
            $map = $1;
        } elsif (/^Rss:\s+(\d+) kB/) {
            my $kb = $1;
            if ($map eq $path) {
                $model += $kb;
            } elsif ($map !~ m{^/} || $map =~ m{^/memfd:}) {
                $anon += $kb;
            }
        }
    }
    return ($model * 1024, $anon * 1024);
}

# an engine's memory whatever its model: the base engine's, less its
# weights, after a completion (its vocabulary of 512 takes no spread ids)
sub held_of {
    my ($name) = @_;
    my $pid = engine_of($file{$name});
    my ($plan) = log_lines(qr/engine "$name": memory plan:/);
    my ($weights, $kv, $ws) = ($plan // '') =~
        /weights (\d+) bytes, .* \(\d+ tokens, (\d+) bytes\), .* workspace (\d+) bytes/;
    return unless $pid && defined $ws;
    my ($model, $anon) = resident($pid, $file{$name});
    return ($model, $anon, $weights, $kv, $ws);
}
my $overhead = 0;
{
    my ($st, $body);
    my $deadline = time + 120;
    while (time < $deadline) {
        ($st, $body) = http_post('/base/v1/completions',
            '{"model":"smollm2","prompt":"Once upon a time","max_tokens":4,'
            . '"temperature":0}', 120);
        last if $st == 200;
        sleep 0.2;
    }
    is($st, 200, 'base: a completion') or diag($body);
    my ($model, $anon, $weights, $kv, $ws) = held_of('base');
    ok(defined $ws, 'base: its engine and memory plan line');
    $overhead = $model + $anon - $kv - $ws - $weights if defined $ws;
    note(sprintf('an engine process holds %.1f MB besides its weights, KV '
                 . 'and workspace (tiny260K)', $overhead / 1e6));
    ok($overhead < 200e6, sprintf('base: %.1f MB of process overhead',
                                  $overhead / 1e6));
}

for my $name (@names) {
    my $deadline = time + 120;
    my ($st, $body);
    while (time < $deadline) {      # the other engines load in turn
        ($st, $body) = http_post("/$name/v1/completions",
            '{"model":"smollm2","prompt":"The capital of France is",'
            . '"max_tokens":4,"temperature":0}', 120);
        last if $st == 200;
        sleep 0.2;
    }
    is($st, 200, "$name: a completion") or diag($body);
    # prompts spread over the vocabulary: every embedding row they look up
    # must come from where the weights are held once (a tied embedding
    # packed as the classifier is read from its packed copy, not from
    # the file's pages the backend let go: reading those would hold the
    # matrix twice, +30% for SmolLM2's Q8_0 embedding)
    # (short prompts: a step of hundreds of tokens grows the workspace
    # by about 6 MB past the plan's, a separate matter)
    my $spread = 0;
    for my $k (0 .. 11) {
        my $ids = join ',', map { ($_ * 1531 + $k * 113) % 49152 } 0 .. 31;
        ($st, $body) = http_post("/$name/v1/completions",
            qq({"model":"smollm2","prompt":[$ids],"max_tokens":1,"temperature":0}), 120);
        $spread++ if $st == 200;
    }
    is($spread, 12, "$name: 12 prompts of 32 token ids spread over the "
                    . "vocabulary");
    my $pid = engine_of($file{$name});
    ok($pid, "$name: its engine") or next;
    my ($plan) = log_lines(qr/engine "$name": memory plan:/);
    my ($weights, $kv, $ws) = ($plan // '') =~
        /weights (\d+) bytes, .* \(\d+ tokens, (\d+) bytes\), .* workspace (\d+) bytes/;
    ok(defined $ws, "$name: the memory plan line") or next;
    my ($model, $anon) = resident($pid, $file{$name});
    my $held = $model + $anon - $kv - $ws - $overhead;
    my $size = -s $file{$name};
    note(sprintf("%s: file %.1f MB, plan weights %.1f MB; resident: model "
                 . "file %.1f MB, anonymous and ring %.1f MB, less KV %.1f MB, "
                 . "workspace %.1f MB and process %.1f MB = %.1f MB of weights "
                 . "(%+.1f%% of the plan, %+.1f%% of the file)", $name,
                 $size / 1e6, $weights / 1e6, $model / 1e6, $anon / 1e6,
                 $kv / 1e6, $ws / 1e6, $overhead / 1e6, $held / 1e6,
                 100 * ($held / $weights - 1),
                 100 * ($held / $size - 1)));
    ok(abs($held / $weights - 1) <= $limit,
       sprintf("%s: weights resident %.1f MB within 5%% of the plan's %.1f MB",
               $name, $held / 1e6, $weights / 1e6));
    ok(abs($held / $size - 1) <= $limit,
       sprintf("%s: weights resident %.1f MB within 5%% of the file's %.1f MB",
               $name, $held / 1e6, $size / 1e6));
    ok(abs($weights / $size - 1) <= $limit,
       sprintf("%s: the plan's weights within 5%% of the file", $name));
}

nginx_cmd('-s', 'stop');
done_testing();
