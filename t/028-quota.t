#!/usr/bin/perl
# Token quotas and priorities (docs/directives.md, llm_token_quota and
# llm_priority; a plain script: it reloads nginx mid-test and races
# requests, docs/testing.md). Prompts are token ids, so every count is
# exact: a refused request never reaches the engine, the headers and
# $llm_quota_remaining say what the bucket holds, a stream the quota cannot
# pay for ends with finish_reason "length", stacked quotas take all or
# nothing, an empty key is not counted, a reload keeps the buckets; the
# location decides a request's priority class and a client can only move
# itself later.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use NgxLlm::Harness;
use IO::Socket::INET;
use Test::More;
use Time::HiRes qw(sleep time);

$ENV{TEST_NGINX_LOAD_MODULES}
    or BAIL_OUT('TEST_NGINX_LOAD_MODULES not set: run the suites with make t-nginx');
$ENV{TEST_NGINX_MODEL}
    or BAIL_OUT('TEST_NGINX_MODEL not set: run the suites with make t-nginx');

my $nginx = $ENV{TEST_NGINX_BINARY} || '/usr/sbin/nginx';
my $stories = "$ENV{TEST_NGINX_FIXTURES}/models/tiny260K-q8_0.gguf";

my $port = nginx_setup('quota', <<"EOF", $ENV{TEST_NGINX_19710} ? (port => $ENV{TEST_NGINX_19710}) : ());
    llm_token_quota_zone \$http_x_key zone=keys:1m;
    llm_token_quota_zone \$llm_model zone=models:1m;
    log_format quota '\$http_x_key \$llm_quota_remaining \$llm_completion_tokens';
    llm_engine main {
        model \$MODEL;
        served_model_name smollm2;
        max_model_len 1024;
        max_num_seqs 1;
        kv_cache_memory 128m;
    }
    llm_engine tiny {
        model $stories;
        max_num_seqs 1;
        max_queued_requests 0;
        max_model_len 512;
        kv_cache_memory 16m;
    }
    server {
        listen 127.0.0.1:\$PORT sndbuf=4k;
        access_log logs/quota.log quota;
        location /v1/ {
            llm_api main;
            llm_token_quota zone=keys tokens=200 per=1d;
        }
        location /stack/v1/ {
            llm_api main;
            llm_token_quota zone=keys tokens=100 per=1d;
            llm_token_quota zone=models tokens=30 per=1d;
        }
        location /keys100/v1/ {
            llm_api main;
            llm_token_quota zone=keys tokens=100 per=1d;
        }
        location /refill/v1/ {
            llm_api main;
            llm_token_quota zone=keys tokens=60 per=1m;
        }
        location /free/v1/ { llm_api main; }
        location /tiny/v1/ {
            llm_api tiny;
            llm_max_buffered 1k;
            llm_token_quota zone=keys tokens=100 per=1d;
        }
        location /batch/v1/ { llm_api main; llm_priority batch; }
        location /fair/v1/ {
            llm_api main;
            llm_priority batch;
            llm_fair_key \$http_x_key;
        }
        location = /healthz { llm_health main; }
        location = /metrics { llm_metrics; }
    }
EOF

# a request with headers of our own, sent
sub send_req {
    my ($path, $body, %h) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port,
                                  Proto => 'tcp') or die "connect: $!";
    my $hdrs = join '', map { "$_: $h{$_}\r\n" } sort keys %h;
    print $s "POST $path HTTP/1.0\r\nHost: localhost\r\n$hdrs"
        . "Content-Type: application/json\r\n"
        . "Content-Length: " . length($body) . "\r\n\r\n$body";
    return $s;
}

# ... and its answer: (status, headers, body)
sub req {
    my $s = send_req(@_);
    local $/;
    my $resp = <$s> // '';
    my ($head, $rbody) = split /\r\n\r\n/, $resp, 2;
    my ($status) = ($head // '') =~ m{^HTTP/1\.[01] (\d+)};
    my %hd = map { /^([^:]+):\s*(.*)$/ ? (lc $1 => $2) : () }
             split /\r\n/, $head // '';
    return ($status // 0, \%hd, $rbody // '');
}

# five prompt ids: every request's prompt is 5 tokens
sub body {
    my (%o) = @_;
    my $b = '{"model":"smollm2","prompt":[1,2,3,4,5],"temperature":0,'
          . '"ignore_eos":true';
    $b .= ",\"max_tokens\":$o{max}" if defined $o{max};
    $b .= ',"stream":true,"stream_options":{"include_usage":true}'
        if $o{stream};
    $b .= ",\"priority\":$o{priority}" if defined $o{priority};
    return "$b}";
}

sub seconds {
    my ($d) = @_;
    return $1 / 1000 if $d =~ /^(\d+)ms$/;
    my ($h, $m, $s) = $d =~ /^(?:(\d+)h)?(?:(\d+)m)?(\d+)s$/ or return -1;
    return ($h // 0) * 3600 + ($m // 0) * 60 + $s;
}

# the access log's lines that match, once there are n (nginx may write the line just after
# the client saw the end of the reply)
sub access_log {
    my ($re, $n) = @_;
    my @l;
    my $deadline = time + 5;
    while (time < $deadline) {
        open my $f, '<', NgxLlm::Harness::prefix() . '/logs/quota.log' or return ();
        @l = grep { $_ =~ $re } <$f>;
        last if @l >= $n;
        sleep 0.05;
    }
    return @l;
}

is(nginx_cmd(), 0, 'nginx starts');
ok(wait_healthy(60), 'engine ready');

# --- admission: prompt + max_tokens, the three headers ------------------------

my $t_alice = time;         # alice's bucket starts full, refilling since
my ($st, $h, $b) = req('/v1/completions', body(max => 20), 'X-Key' => 'alice');
is($st, 200, 'a request within the quota');
like($b, qr/"prompt_tokens":5,"completion_tokens":20\b/, '5 + 20 tokens used');
is($h->{'x-ratelimit-limit-tokens'}, 200, 'x-ratelimit-limit-tokens: the bucket');
is($h->{'x-ratelimit-remaining-tokens'}, 175, 'x-ratelimit-remaining-tokens: 200 - 5 - 20');
like($h->{'x-ratelimit-reset-tokens'}, qr/^\d+h\d+m\d+s$/, "reset as OpenAI writes it: $h->{'x-ratelimit-reset-tokens'}");
# 25 tokens at 200 per day: 25 * 432 s = 3h0m0s
cmp_ok(abs(seconds($h->{'x-ratelimit-reset-tokens'}) - 25 * 432), '<=', 1,
       'reset: 25 tokens at 200 a day');

my @log = access_log(qr/^alice /, 1);
like($log[-1], qr/^alice 175 20$/, '$llm_quota_remaining in the access log');

# --- refused before the engine: 429, Retry-After, OpenAI's body -------------

my $prompts = metric('vllm:prompt_tokens_total');
($st, $h, $b) = req('/v1/completions', body(max => 171), 'X-Key' => 'alice');
is($st, 429, '5 + 171 > 175: 429');
like($b, qr/"type":"tokens".*"code":"rate_limit_exceeded"/s, 'OpenAI error body: type tokens, code rate_limit_exceeded');
like($b, qr/Limit 200, Remaining 175, Requested 176/, 'the message says the numbers');
# one token at 200 a day is 432 s, less what refilled since the first request
my $refilled = time - $t_alice;
ok($h->{'retry-after'} <= 432 && $h->{'retry-after'} >= 432 - $refilled - 1,
   sprintf('Retry-After: a token at 200 a day, %.1f s into refilling it: %s s',
           $refilled, $h->{'retry-after'}));
is($h->{'x-ratelimit-remaining-tokens'}, 175, 'the 429 says what is left');
is(metric('vllm:prompt_tokens_total'), $prompts, 'the engine saw no prompt token of it');
@log = access_log(qr/^alice /, 2);
like($log[-1], qr/^alice 175 0$/, 'the 429 logs what is left');

($st, $h, $b) = req('/v1/completions', body(max => 300), 'X-Key' => 'alice');
is($st, 429, 'more than the bucket holds: 429');
like($b, qr/Request too large.*Limit 200, Requested 305/, 'request too large, as OpenAI says it');

($st, $h, $b) = req('/v1/completions', body(max => 170), 'X-Key' => 'alice');
is($st, 200, 'exactly what is left: served');
is($h->{'x-ratelimit-remaining-tokens'}, 0, 'nothing left');
is(metric('vllm:prompt_tokens_total'), $prompts + 5, 'that one reached the engine');

# --- no max_tokens: the stream takes what is left and ends with "length" ------

my $cancelled = metric('ngx_llm_cancelled_total');
($st, $h, $b) = req('/refill/v1/completions', body(stream => 1), 'X-Key' => 'bob');
is($st, 200, 'a stream without max_tokens');
my @tok = $b =~ /"text":"/g;
my ($finish) = $b =~ /"finish_reason":"(\w+)"/;
is($finish, 'length', 'cut by the quota: finish_reason length');
my ($pt, $ct) = $b =~ /"usage":\{"prompt_tokens":(\d+),"completion_tokens":(\d+)/;
is($pt, 5, 'usage chunk: 5 prompt tokens');
# 55 reserved at admission; the bucket refills a token a second meanwhile
cmp_ok($ct, '>=', 55, "usage chunk: $ct completion tokens, at least the 55 left");
cmp_ok($ct, '<', 1000, 'far fewer than the context would allow');
like($b, qr/data: \[DONE\]\n\n$/, 'the stream ends cleanly with [DONE]');
my $deadline = time + 10;
sleep 0.1 while time < $deadline && (metric('vllm:num_requests_running') // 1) != 0;
is(metric('vllm:num_requests_running'), 0, 'the engine dropped the sequence');
is(metric('ngx_llm_cancelled_total'), $cancelled + 1, 'the engine counted the cancel');

# the same cut without a stream: the answer says "length" and its usage
($st, $h, $b) = req('/refill/v1/completions', body(), 'X-Key' => 'dave');
is($st, 200, 'a non-streaming request without max_tokens');
like($b, qr/"finish_reason":"length"/, 'cut by the quota: finish_reason length');
($pt, $ct) = $b =~ /"usage":\{"prompt_tokens":(\d+),"completion_tokens":(\d+)/;
ok($pt == 5 && $ct >= 55 && $ct < 1000, "usage: 5 + $ct (at least the 55 left, far from the context)");
is($h->{'x-ratelimit-remaining-tokens'}, 0, 'its reservation was all the bucket held');

# --- a request the engine refuses costs nothing -----------------------------

{
    # a client that reads nothing holds the tiny engine's only place
    my $hold = NgxLlm::Harness::open_stream('POST', '/tiny/v1/completions',
        '{"model":"tiny","stream":true,"prompt":[1,2,3],"max_tokens":500,'
        . '"ignore_eos":true}', rcvbuf => 2048);
    my ($r) = read_some($hold, 60, qr/data: \{/);
    ok(@$r, 'the tiny engine\'s place is held');
    my $tb = '{"model":"tiny","prompt":[1,2,3,4,5],"max_tokens":10}';
    ($st, $h, $b) = req('/tiny/v1/completions', $tb, 'X-Key' => 'erin');
    is($st, 429, 'the engine refuses: its queue is full');
    like($b, qr/"code":"queue_full"/, 'queue_full, not the quota');
    close $hold;
    my $deadline = time + 10;
    do { sleep 0.2; ($st, $h, $b) = req('/tiny/v1/completions', $tb, 'X-Key' => 'erin') }
        while $st == 429 && time < $deadline;
    is($st, 200, 'served once the place is free');
    is($h->{'x-ratelimit-remaining-tokens'}, 85,
       'the refused requests cost nothing: 100 - 15');
}

# --- stacked quotas: the tightest answers, all or nothing --------------------

($st, $h) = req('/stack/v1/completions', body(max => 10), 'X-Key' => 'carol');
is($st, 200, 'stacked: first request');
is($h->{'x-ratelimit-limit-tokens'}, 30, 'the headers are the tighter bucket\'s');
is($h->{'x-ratelimit-remaining-tokens'}, 15, '30 - 15');
($st, $h) = req('/stack/v1/completions', body(max => 10), 'X-Key' => 'carol');
is($h->{'x-ratelimit-remaining-tokens'}, 0, 'the model bucket is empty');
($st, $h, $b) = req('/stack/v1/completions', body(max => 10), 'X-Key' => 'carol');
is($st, 429, 'the model quota refuses');
like($b, qr/zone=models/, 'the message names the zone that refused');
($st, $h, $b) = req('/stack/v1/completions', body(), 'X-Key' => 'carol');
is($st, 429, 'without max_tokens too (prompt + 1 does not fit)');
($st, $h) = req('/keys100/v1/completions', body(max => 10), 'X-Key' => 'carol');
is($h->{'x-ratelimit-remaining-tokens'}, 55,
   'the key bucket (same zone and limit) lost only the two served: 100 - 30 - 15');

# --- an empty key is not counted -------------------------------------------

for (1 .. 2) {
    ($st, $h) = req('/keys100/v1/completions', body(max => 40));
    is($st, 200, "no key: not counted ($_)");
}
ok(!exists $h->{'x-ratelimit-remaining-tokens'}, 'no key: no quota headers');
@log = access_log(qr/^- - 40$/, 2);
is(scalar @log, 2, 'no key: $llm_quota_remaining is "-" in the access log');

# --- a reload keeps the buckets ----------------------------------------------

my $master = master_pid();
my @old = worker_pids($master);
is(nginx_cmd('-s', 'reload'), 0, 'reload');
$deadline = time + 20;
sleep 0.1 while time < $deadline
                && grep { my $o = $_; grep { $_ == $o } worker_pids($master) } @old;
ok(!(grep { my $o = $_; grep { $_ == $o } worker_pids($master) } @old), 'old workers gone');
($st, $h, $b) = req('/v1/completions', body(max => 1), 'X-Key' => 'alice');
is($st, 429, 'after the reload alice\'s bucket is still empty');
($st, $h) = req('/keys100/v1/completions', body(max => 10), 'X-Key' => 'carol');
is($h->{'x-ratelimit-remaining-tokens'}, 40, 'and carol\'s still holds 55 - 15');

# --- priority: the location's class; a client only moves itself later ------

# one sequence at a time: a long request holds it, two wait; the engine
# runs the lower priority first. The long request must outlast the 0.3 s
# between the two others on a fast engine: 600 tokens (120 ended first at
# ~400 tokens/s)
sub race {
    my ($first_path, %first) = @_;
    my $long = NgxLlm::Harness::open_stream('POST', '/free/v1/completions',
                                            body(max => 600, stream => 1));
    my ($r) = read_some($long, 60, qr/data: \{/);
    my @s;
    push @s, NgxLlm::Harness::open_stream('POST', $first_path, body(max => 4, %first));
    sleep 0.3;
    push @s, NgxLlm::Harness::open_stream('POST', '/free/v1/completions', body(max => 4));
    my %done;
    my $deadline = time + 120;
    while (time < $deadline && keys %done < 2) {
        for my $i (0, 1) {
            next if $done{$i};
            my $n = sysread($s[$i], my $buf, 65536);
            $done{$i} = time if defined $n && $n == 0;
        }
        sleep 0.01;
    }
    read_all($long, 60);
    return ($done{0} // 1e18, $done{1} // 1e18);
}

my ($t_batch, $t_inter) = race('/batch/v1/completions');
cmp_ok($t_inter, '<', $t_batch, 'llm_priority batch: an interactive request sent later runs first');

($t_batch, $t_inter) = race('/batch/v1/completions', priority => -1000);
cmp_ok($t_inter, '<', $t_batch, 'a batch client asking for priority -1000 still runs after interactive');

my ($t_late, $t_norm) = race('/free/v1/completions', priority => 50);
cmp_ok($t_norm, '<', $t_late, 'a client may move itself later (priority 50)');

# --- what nginx wrote into the ring slot --------------------------------------

# FNV-1a 64 of the llm_fair_key value (ngx_http_llm_quota.c)
sub fnv1a64 {
    require Math::BigInt;
    my $h = Math::BigInt->from_hex('cbf29ce484222325');
    my $mod = Math::BigInt->new(2)->bpow(64);
    for my $c (unpack 'C*', $_[0]) {
        $h->bxor($c)->bmul(Math::BigInt->from_hex('100000001b3'))->bmod($mod);
    }
    return $h->bstr;
}

# the slot of a request while it streams: (priority, fair_key)
sub slot_of {
    my ($path, $prio, %h) = @_;
    my ($st, $hb) = http_get('/healthz', 5);
    my ($epid) = $hb =~ /"engine_pid":(\d+)/;
    my $s = send_req($path, body(max => 200, stream => 1, priority => $prio), %h);
    $s->blocking(0);
    my ($r) = read_some($s, 60, qr/data: \{/);
    my @slots = grep { /^\d+ 3 / } `$ENV{TEST_NGINX_BUILD}/t/ring_poke $epid slots`;
    close $s;
    my $deadline = time + 10;
    sleep 0.1 while time < $deadline && (metric('vllm:num_requests_running') // 1) != 0;
    return @slots == 1 ? (split ' ', $slots[0])[2, 3] : ('none', 'none');
}

my ($prio, $fk) = slot_of('/fair/v1/completions', -1000, 'X-Key' => 'alice');
is($prio, 100, 'the slot: llm_priority batch, the body\'s -1000 raised to it');
is($fk, fnv1a64('alice'), 'the slot: fair_key is the hash of llm_fair_key\'s value');
($prio, $fk) = slot_of('/fair/v1/completions', 130);
is($prio, 130, 'the slot: a body priority later than the class is kept');
is($fk, 0, 'the slot: an empty llm_fair_key is 0 (no key)');
($prio, $fk) = slot_of('/free/v1/completions', -5);
is($prio, 0, 'the slot: no llm_priority is interactive (0); -5 raised to it');

# --- configuration errors are [emerg] with a clear line ----------------------

sub conf_error {
    my ($http) = @_;
    my $dir = NgxLlm::Harness::prefix() . '/conf-err';
    mkdir $dir;
    mkdir "$dir/logs";
    open my $f, '>', "$dir/nginx.conf" or die $!;
    print $f "load_module $ENV{TEST_NGINX_LOAD_MODULES};\n"
           . "error_log logs/error.log;\nevents {}\nhttp {\n$http\n}\n";
    close $f;
    return scalar `$nginx -t -p $dir/ -e $dir/logs/error.log -c $dir/nginx.conf 2>&1`;
}

like(conf_error('llm_token_quota_zone $http_x_key zone=k:1k;'),
     qr/\[emerg\].*llm_token_quota_zone "zone=k:1k" is too small/, 'a zone too small: [emerg]');
like(conf_error('llm_token_quota_zone $http_x_key zone=k:abc;'),
     qr/\[emerg\].*invalid zone size "zone=k:abc"/, 'a bad zone size: [emerg]');
like(conf_error('server { location / { llm_token_quota zone=nope tokens=1 per=1m; } }'),
     qr/\[emerg\].*unknown llm_token_quota_zone "nope"/, 'an unknown zone: [emerg]');
like(conf_error("llm_token_quota_zone \$http_x_key zone=k:1m;\n"
                . 'server { location / { llm_token_quota zone=k tokens=10 per=5x; } }'),
     qr/\[emerg\].*invalid per "per=5x"/, 'a bad per=: [emerg]');
like(conf_error("llm_token_quota_zone \$http_x_key zone=k:1m;\n"
                . 'server { location / { llm_token_quota zone=k tokens=0 per=1m; } }'),
     qr/\[emerg\].*invalid tokens "tokens=0"/, 'tokens=0: [emerg]');
like(conf_error('server { location / { llm_priority urgent; } }'),
     qr/\[emerg\].*invalid llm_priority "urgent"/, 'an unknown priority class: [emerg]');

nginx_cmd('-s', 'stop');
wait_gone(30, $master) or kill 'TERM', $master;

done_testing();
