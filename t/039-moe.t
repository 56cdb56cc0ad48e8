#!/usr/bin/perl
# Mixture of experts through nginx (issue 29): the tiny random qwen3moe
# (t/data/models/hf-qwen3moe, 8 experts, 2 per token) served as a Hugging
# Face directory and as its GGUF. Greedy replies of several requests sent
# at once (one batcher step holds all their tokens, grouped by expert)
# equal the same requests one at a time, text and logprobs, streamed or
# not; the directory and the GGUF (the same weights) answer alike. A plain
# script (as t/029): it compares bodies with Perl.
use strict;
use warnings;

use Cwd qw(abs_path);
use FindBin;
use lib "$FindBin::Bin/lib";
use NgxLlm::Harness;
use JSON::PP;
use Test::More;

$ENV{TEST_NGINX_LOAD_MODULES}
    or BAIL_OUT('TEST_NGINX_LOAD_MODULES not set: run the suites with make t-nginx');

my $dir = abs_path("$FindBin::Bin/data/models/hf-qwen3moe");
my $binary = $ENV{TEST_NGINX_ENGINE} ? "binary $ENV{TEST_NGINX_ENGINE};" : '';

my $port = nginx_setup('moe', <<"EOF", $ENV{TEST_NGINX_MOE_PORT} ? (port => $ENV{TEST_NGINX_MOE_PORT}) : ());
    llm_engine hf {
        model $dir;
        served_model_name moe;
        $binary
        max_model_len 512;
        kv_cache_memory 16m;
    }
    llm_engine gg {
        model $dir.gguf;
        served_model_name moe-gguf;
        $binary
        max_model_len 512;
        kv_cache_memory 16m;
    }
    server {
        listen 127.0.0.1:\$PORT;
        location /v1/ { llm_api hf; }
        location /gguf/v1/ { llm_api gg; }
        location = /healthz { llm_health hf; }
        location = /gguf/healthz { llm_health gg; }
    }
EOF

is(nginx_cmd(), 0, 'nginx starts');
ok(wait_healthy(60), 'engine ready');

my $json = JSON::PP->new->utf8->canonical;
my @prompts = ('Hi! What is 2+2?', 'Tell me about the forest.',
               'The quick brown fox', "Caf\x{e9} na\x{ef}ve 12345",
               'Write a poem about the sea.', 'Why is the sky blue?');

sub body {
    my ($p, $stream) = @_;
    return $json->encode({
        model => 'moe', max_tokens => 16, temperature => 0,
        logprobs => JSON::PP::true,
        ($stream ? (stream => JSON::PP::true) : ()),
        messages => [{ role => 'user', content => $p }] });
}

# text and logprobs of an unstreamed reply (the whole response)
sub reply_of {
    my ($raw) = @_;
    my ($b) = $raw =~ /\r\n\r\n(.*)$/s;
    my $d = eval { decode_json($b // '') } or return ('', '');
    my $c = $d->{choices}[0];
    return ($c->{message}{content},
            join(',', map { $_->{logprob} } @{ $c->{logprobs}{content} }));
}

# the same of a stream
sub stream_of {
    my ($raw) = @_;
    my ($text, @lp) = ('');
    for my $line ($raw =~ /^data: (\{.*)$/mg) {
        my $c = eval { decode_json($line) } or next;
        for my $e (@{ $c->{choices} }) {
            $text .= $e->{delta}{content} // '';
            push @lp, map { $_->{logprob} } @{ $e->{logprobs}{content} // [] };
        }
    }
    return ($text, join(',', @lp));
}

# one at a time
my (@text, @lp);
for my $i (0 .. $#prompts) {
    my ($st, undef, $raw) = http_post('/v1/chat/completions',
                                      body($prompts[$i]), 60);
    is($st, 200, "prompt $i alone: 200");
    ($text[$i], $lp[$i]) = reply_of($raw);
    isnt($lp[$i], '', "prompt $i alone: tokens with logprobs");
}
my %distinct = map { $_ => 1 } @text;
ok(keys %distinct > 1, 'the prompts get different replies');

# all at once, unstreamed then streamed: the engine batches them
for my $stream (0, 1) {
    my @s = map { open_stream('POST', '/v1/chat/completions',
                              body($prompts[$_], $stream)) } 0 .. $#prompts;
    for my $i (0 .. $#prompts) {
        my ($raw) = read_all($s[$i], 60);
        my ($t, $l) = $stream ? stream_of($raw) : reply_of($raw);
        my $how = ($stream ? 'streamed' : 'unstreamed') . ' among '
                  . scalar(@prompts) . ' at once';
        is($t, $text[$i], "prompt $i $how: the text it had alone");
        is($l, $lp[$i], "prompt $i $how: the logprobs it had alone");
    }
}

# the GGUF of the same weights: the same greedy text
for (1 .. 600) {
    last if (http_get('/gguf/healthz', 2))[0] == 200;
    select(undef, undef, undef, 0.1);
}
my $gb = $json->decode(body($prompts[0]));
$gb->{model} = 'moe-gguf';
my ($st, undef, $raw) = http_post('/gguf/v1/chat/completions',
                                  $json->encode($gb), 60);
is($st, 200, 'GGUF: 200');
is((reply_of($raw))[0], $text[0], "GGUF: the directory's greedy text");

nginx_cmd('-s', 'stop');
done_testing();
