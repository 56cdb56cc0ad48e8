#!/usr/bin/perl
# Mixture of experts through nginx (issue 29): the tiny random qwen3moe
# (t/data/models/hf-qwen3moe, 8 experts, 2 per token) served as a Hugging
# Face directory and as its GGUF. Greedy replies of several requests sent
# at once (one batcher step holds all their tokens, grouped by expert)
# equal the same requests one at a time, text and logprobs, streamed or
# not; the directory and the GGUF (the same weights) answer alike. With a
# template that teaches Qwen3-Coder's XML calls (the published one renders
# 600 tokens of tool instructions, past this model's 256 positions; as
# t/036's), the same model serves Qwen3-Coder's tool calls: a call forced
# by a grammar comes back as tool_calls, unstreamed and streamed (t/036
# checks tool_choice required's JSON body on SmolLM2: random weights
# write no closed body). A plain script (as t/029): it compares bodies
# with Perl.
use strict;
use warnings;

use Cwd qw(abs_path);
use File::Temp qw(tempfile);
use FindBin;
use lib "$FindBin::Bin/lib";
use NgxLlm::Harness;
use JSON::PP;
use Test::More;

$ENV{TEST_NGINX_LOAD_MODULES}
    or BAIL_OUT('TEST_NGINX_LOAD_MODULES not set: run the suites with make t-nginx');

my $dir = abs_path("$FindBin::Bin/data/models/hf-qwen3moe");
my ($cfh, $coder) = tempfile('moe-coder-XXXXXX', TMPDIR => 1, UNLINK => 1,
                              SUFFIX => '.jinja');
print $cfh "{%- if tools %}{{- '<|im_start|>system\\nTo call a function "
    . "reply:\\n<tool_call>\\n<function=example_function_name>\\n"
    . "<parameter=example_parameter_1>\\nvalue_1\\n</parameter>\\n</function>"
    . "\\n</tool_call><|im_end|>\\n' }}{%- endif %}{%- for m in messages %}"
    . "{{- '<|im_start|>' + m.role + '\\n' + (m.content or '') + "
    . "'<|im_end|>\\n' }}{%- endfor %}{{- '<|im_start|>assistant\\n' }}\n";
close($cfh);
chmod 0644, $coder;
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
    llm_engine coder {
        model $dir;
        served_model_name moe-coder;
        chat_template $coder;
        $binary
        max_model_len 1024;
        kv_cache_memory 16m;
    }
    server {
        listen 127.0.0.1:\$PORT;
        location /v1/ { llm_api hf; }
        location /coder/v1/ { llm_api coder; }
        location = /coder/healthz { llm_health coder; }
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

# Qwen3-Coder's XML tool calls on the MoE model (its published template)
for (1 .. 600) {
    last if (http_get('/coder/healthz', 2))[0] == 200;
    select(undef, undef, undef, 0.1);
}
my $tools = [{ type => 'function', function => {
    name => 'get_weather', parameters => { type => 'object',
        properties => { city => { type => 'string' },
                        days => { type => 'integer' } },
        required => ['city'] } } }];
my $xml = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
          . "</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n"
          . "</tool_call>";
(my $gbnf = $json->encode($xml)) =~ s/^"|"$//g;
sub coder_body {
    my (%o) = @_;
    return $json->encode({
        model => 'moe-coder', max_tokens => 150, temperature => 0,
        messages => [{ role => 'user', content => 'Weather in Paris?' }],
        tools => $tools, %o });
}
my $force = { type => 'grammar', grammar => "root ::= \"$gbnf\"" };

($st, undef, $raw) = http_post('/coder/v1/chat/completions',
                               coder_body(response_format => $force), 60);
is($st, 200, 'coder: XML call: 200');
my ($cb) = $raw =~ /\r\n\r\n(.*)$/s;
my $cd = eval { decode_json($cb) } // {};
my $call = $cd->{choices}[0]{message}{tool_calls}[0]{function} // {};
is($call->{name}, 'get_weather', 'coder: the XML call parsed: its name')
    or diag($cb);
is($call->{arguments}, '{"city":"Paris","days":3}',
   'coder: its arguments, typed by the schema');
is($cd->{choices}[0]{finish_reason}, 'tool_calls',
   'coder: finish_reason tool_calls');
cmp_ok($cd->{usage}{prompt_tokens}, '>', 30,
       'coder: the template rendered the tool instructions');

my $s = open_stream('POST', '/coder/v1/chat/completions',
                    coder_body(response_format => $force, stream => JSON::PP::true));
($raw) = read_all($s, 60);
my ($args, $name, $fin) = ('', '', '');
for my $line ($raw =~ /^data: (\{.*)$/mg) {
    my $c = eval { decode_json($line) } or next;
    for my $e (@{ $c->{choices} }) {
        for my $tc (@{ $e->{delta}{tool_calls} // [] }) {
            $name .= $tc->{function}{name} // '';
            $args .= $tc->{function}{arguments} // '';
        }
        $fin = $e->{finish_reason} if $e->{finish_reason};
    }
}
is($name, 'get_weather', 'coder streamed: the call\'s name');
is($args, '{"city":"Paris","days":3}', 'coder streamed: its arguments');
is($fin, 'tool_calls', 'coder streamed: finish_reason tool_calls');
like($raw, qr/data: \[DONE\]\n\n$/, 'coder streamed: ends with [DONE]');

nginx_cmd('-s', 'stop');
done_testing();
