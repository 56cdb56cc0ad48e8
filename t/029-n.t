#!/usr/bin/perl
# n > 1 (issue 12 item 4): one prompt, n choices forked in the engine after
# one prefill, each in its own ring slot. Non-streaming replies carry
# choices[0..n-1], each with its finish_reason and logprobs; a stream
# interleaves chunks tagged with their index, each choice ends with its own
# finish chunk, the usage chunk counts every choice's completion tokens and
# the prompt once. Choice i samples with seed + i, so it equals an n=1
# request with that seed; greedy choices are identical; n over llm_max_n
# is a 400 naming n; a constraint holds for every choice; a client leaving
# a stream cancels every choice (the batch empties). A plain script (as
# t/026): it checks bodies with Perl, which data blocks cannot.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use NgxLlm::Harness;
use IO::Socket::INET;
use JSON::PP;
use Test::More;

$ENV{TEST_NGINX_LOAD_MODULES}
    or BAIL_OUT('TEST_NGINX_LOAD_MODULES not set: run the suites with make t-nginx');
$ENV{TEST_NGINX_MODEL}
    or BAIL_OUT('TEST_NGINX_MODEL not set: run the suites with make t-nginx');

my $binary = $ENV{TEST_NGINX_ENGINE} ? "binary $ENV{TEST_NGINX_ENGINE};" : '';

my $port = nginx_setup('nchoice', <<"EOF", $ENV{TEST_NGINX_19120} ? (port => $ENV{TEST_NGINX_19120}) : ());
    llm_token_quota_zone \$http_x_key zone=nkeys:1m;
    log_format ntokens '\$llm_completion_tokens';
    llm_engine main {
        model \$MODEL;
        served_model_name smollm2;
        $binary
        max_model_len 2048;
        kv_cache_memory 256m;
    }
    server {
        listen 127.0.0.1:\$PORT;
        access_log logs/ntokens.log ntokens;
        location /v1/ { llm_api main; }
        location /two/v1/ { llm_api main; llm_max_n 2; }
        location /quota/v1/ {
            llm_api main;
            llm_token_quota zone=nkeys tokens=40 per=1d;
        }
        location = /healthz { llm_health main; }
        location = /metrics { llm_metrics; }
    }
EOF

is(nginx_cmd(), 0, 'nginx starts');
ok(wait_healthy(60), 'engine ready');

my $json = JSON::PP->new->canonical;
my $prompt = 'Tell me a short story about a cat.';

# POST a chat request; (status, decoded body or undef, raw body)
sub chat {
    my ($fields, $path) = @_;
    my $req = { model => 'smollm2', max_tokens => 12, temperature => 1,
                messages => [{ role => 'user', content => $prompt }],
                %$fields };
    my ($st, $body) = http_post($path // '/v1/chat/completions',
                                $json->encode($req), 120);
    my $d = eval { decode_json($body) };
    return ($st, $d, $body);
}

sub texts { [ map { $_->{message}{content} } @{ $_[0]{choices} } ] }

# --- non-streaming ------------------------------------------------------------

my ($st, $d, $raw) = chat({ n => 3, seed => 7, logprobs => JSON::PP::true });
is($st, 200, 'n=3: 200') or diag($raw);
my @ch = @{ $d->{choices} // [] };
is(scalar @ch, 3, 'n=3: three choices');
is_deeply([ map { $_->{index} } @ch ], [0, 1, 2], 'n=3: indexes 0, 1, 2');
is(scalar(grep { ($_->{finish_reason} // '') =~ /^(stop|length)$/ } @ch), 3,
   'n=3: every choice has its finish_reason');
my $lp_tokens = 0;
$lp_tokens += scalar @{ $_->{logprobs}{content} // [] } for @ch;
is($d->{usage}{completion_tokens}, $lp_tokens, 'n=3: completion_tokens counts '
   . 'every choice (the sum of their logprobs entries)');
isnt(texts($d)->[0] . texts($d)->[1] . texts($d)->[2], '', 'n=3: text came');

my ($st1, $d1) = chat({ seed => 7 });
is($d->{usage}{prompt_tokens}, $d1->{usage}{prompt_tokens},
   'n=3: the prompt is counted once');

# each choice samples with seed + i: it is the n=1 request with that seed
for my $i (0 .. 2) {
    my ($sti, $di) = chat({ seed => 7 + $i });
    is($di->{choices}[0]{message}{content}, texts($d)->[$i],
       "choice $i == the n=1 reply with seed 7+$i");
}
ok(texts($d)->[0] ne texts($d)->[1] || texts($d)->[1] ne texts($d)->[2],
   'the choices differ (temperature 1, seeds 7, 8, 9)');

my ($st2, $d2) = chat({ n => 3, seed => 7, logprobs => JSON::PP::true });
is_deeply(texts($d2), texts($d), 'n=3 with the same seed: the same choices');

($st, my $g) = chat({ n => 3, temperature => 0 });
is(scalar(grep { $_ eq texts($g)->[0] } @{ texts($g) }), 3,
   'greedy n=3: the choices are identical');

# --- streaming ----------------------------------------------------------------

my $s = open_stream('POST', '/v1/chat/completions', $json->encode({
    model => 'smollm2', stream => JSON::PP::true, temperature => 1, seed => 7,
    n => 3, max_tokens => 12, logprobs => JSON::PP::true,
    stream_options => { include_usage => JSON::PP::true },
    messages => [{ role => 'user', content => $prompt }] }));
my ($sbody) = read_all($s, 120);
my (@stext, @sfinish, @stokens, $usage, %seen, $order);
$order = '';
for my $line ($sbody =~ /^data: (\{.*)$/mg) {
    my $c = eval { decode_json($line) } or next;
    $usage = $c->{usage} if $c->{usage};
    for my $e (@{ $c->{choices} }) {
        my $i = $e->{index};
        $seen{$i}++;
        $order .= $i;
        $stext[$i] .= $e->{delta}{content} // '';
        $stokens[$i] += scalar @{ $e->{logprobs}{content} // [] };
        $sfinish[$i] = $e->{finish_reason} if $e->{finish_reason};
    }
}
like($sbody, qr/data: \[DONE\]\r?\n\r?\n$/, 'stream n=3: ends with [DONE]');
is_deeply([ sort keys %seen ], [0, 1, 2], 'stream n=3: chunks of indexes 0..2');
is(scalar(grep { ($_ // '') =~ /^(stop|length)$/ } @sfinish[0 .. 2]), 3,
   'stream n=3: each choice finished');
is_deeply([ @stext[0 .. 2] ], texts($d), 'stream n=3: each index streams the '
   . 'text of the same choice unstreamed (same seed)');
my $st_sum = 0;
$st_sum += $_ // 0 for @stokens;
ok($usage && $usage->{completion_tokens} == $st_sum
   && $usage->{prompt_tokens} == $d->{usage}{prompt_tokens},
   "stream n=3: usage counts every choice ($st_sum) and the prompt once")
    or diag($json->encode($usage // {}));
like($order, qr/0.*1.*2.*0.*1.*2/, 'stream n=3: the choices\' chunks '
     . 'interleave as they come')
    or diag($order);

# --- /v1/completions ----------------------------------------------------------

my ($cst, $cbody) = http_post('/v1/completions', $json->encode({
    model => 'smollm2', prompt => 'Once upon a time', max_tokens => 8,
    temperature => 1, seed => 3, n => 2 }), 120);
my $cd = eval { decode_json($cbody) } // {};
is($cst, 200, 'completions n=2: 200') or diag($cbody);
is_deeply([ map { $_->{index} } @{ $cd->{choices} // [] } ], [0, 1],
   'completions n=2: indexes 0, 1, each with text')
    or diag($cbody);
ok(defined $cd->{choices}[1]{text} && $cd->{choices}[1]{finish_reason},
   'completions n=2: choice 1 has text and a finish_reason');

# --- the cap ------------------------------------------------------------------

($st, $d, $raw) = chat({ n => 3 }, '/two/v1/chat/completions');
is($st, 400, 'n=3 over llm_max_n 2: 400') or diag($raw);
is($d->{error}{param}, 'n', 'the error names n');
like($d->{error}{message} // '', qr/2/, 'and says the cap') or diag($raw);
($st, $d, $raw) = chat({ n => 2 }, '/two/v1/chat/completions');
is($st, 200, 'n=2 under llm_max_n 2: 200') or diag($raw);
($st, $d, $raw) = chat({ n => 9 });
is($st, 400, 'n=9 over the default llm_max_n 8: 400') or diag($raw);
($st, $d, $raw) = chat({ n => 0 });
is($st, 400, 'n=0: 400') or diag($raw);

# --- a token quota reserves the prompt once and n x max_tokens -------------

# a 5-token prompt (ids), greedy, every token generated
sub quota_req {
    my ($key, $n) = @_;
    my $body = $json->encode({
        model => 'smollm2', prompt => [1, 2, 3, 4, 5], max_tokens => 12,
        temperature => 0, ignore_eos => JSON::PP::true, n => $n });
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port,
                                  Proto => 'tcp') or die "connect: $!";
    print $s "POST /quota/v1/completions HTTP/1.0\r\nHost: localhost\r\n"
        . "X-Key: $key\r\nContent-Type: application/json\r\n"
        . "Content-Length: " . length($body) . "\r\n\r\n$body";
    local $/;
    my $resp = <$s> // '';
    my ($status) = $resp =~ m{^HTTP/1\.[01] (\d+)};
    my ($left) = $resp =~ /^X-RateLimit-Remaining-Tokens: (\d+)/mi;
    my ($rbody) = $resp =~ /\r\n\r\n(.*)$/s;
    return ($status // 0, $left, eval { decode_json($rbody // '') } // {});
}

my ($qst, $qleft, $qd) = quota_req('a', 3);
is($qst, 429, 'quota 40: n=3 x 12 + 5 = 41 tokens do not fit');
($qst, $qleft, $qd) = quota_req('a', 1);
is($qst, 200, 'quota 40: n=1 x 12 + 5 = 17 fit');
# the access log's lines ($llm_completion_tokens) equal to $v, once the
# requests before settled (a line can come after its client read the end)
sub logged {
    my ($v) = @_;
    select undef, undef, undef, 0.5;
    open my $lf, '<', NgxLlm::Harness::prefix() . '/logs/ntokens.log'
        or die "ntokens.log: $!";
    return scalar grep { /^\Q$v\E$/ } <$lf>;
}
my $n_logged = logged(24);
($qst, $qleft, $qd) = quota_req('b', 2);
is($qst, 200, 'quota 40: n=2 x 12 + 5 = 29 fit');
is($qd->{usage}{completion_tokens}, 24, 'n=2: 24 completion tokens');
is($qleft, 40 - 29, 'n=2: the bucket holds 40 - 5 - 2 x 12');
is(logged(24), $n_logged + 1,
   '$llm_completion_tokens counts every choice (24 logged)');

# --- a constraint holds for every choice --------------------------------------

($st, $d, $raw) = chat({ n => 3, seed => 11, max_tokens => 200,
                         response_format => { type => 'json_object' },
                         messages => [{ role => 'user', content =>
                             'Reply with a JSON object with one key "name" '
                             . 'holding a cat\'s name.' }] });
is($st, 200, 'json_object n=3: 200') or diag($raw);
is(scalar(grep { ref(eval { decode_json($_ // '') }) eq 'HASH' }
          @{ texts($d // {}) }), 3,
   'json_object n=3: every choice parses as a JSON object')
    or diag($raw);

# --- a client that leaves cancels every choice --------------------------------

my $before = metric('ngx_llm_cancelled_total') // 0;
$s = open_stream('POST', '/v1/chat/completions', $json->encode({
    model => 'smollm2', stream => JSON::PP::true, temperature => 1, n => 3,
    max_tokens => 1000, ignore_eos => JSON::PP::true,
    messages => [{ role => 'user', content => $prompt }] }));
read_some($s, 30, qr/"index":2/);
close $s;
my $running = -1;
for (1 .. 100) {
    $running = metric('vllm:num_requests_running') // -1;
    last if $running == 0;
    select undef, undef, undef, 0.1;
}
is($running, 0, 'a client gone mid-stream: no choice runs on');
is((metric('ngx_llm_cancelled_total') // 0) - $before, 3,
   'and all three were cancelled');

nginx_cmd('-s', 'stop');
done_testing();
