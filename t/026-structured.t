#!/usr/bin/perl
# Structured outputs (issue 12): response_format json_object, json_schema,
# grammar and regex through nginx, the ring, the engine's compile thread
# and the masked sampler, on SmolLM2. Outputs are parsed and checked here
# (JSON::PP: shape, required, enum, types); the refusals are 400s with the
# param or the compiler's message; max_tokens ends "length" on a partial
# output; a stream carries a constrained output too. A plain script (as
# t/030): it checks bodies with Perl, which data blocks cannot.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use NgxLlm::Harness;
use JSON::PP;
use Test::More;

$ENV{TEST_NGINX_LOAD_MODULES}
    or BAIL_OUT('TEST_NGINX_LOAD_MODULES not set: run the suites with make t-nginx');
$ENV{TEST_NGINX_MODEL}
    or BAIL_OUT('TEST_NGINX_MODEL not set: run the suites with make t-nginx');

my $binary = $ENV{TEST_NGINX_ENGINE} ? "binary $ENV{TEST_NGINX_ENGINE};" : '';

nginx_setup('structured', <<"EOF", port => $ENV{TEST_NGINX_PORT});
    llm_engine main {
        model \$MODEL;
        served_model_name smollm2;
        $binary
        max_model_len 2048;
        kv_cache_memory 256m;
    }
    server {
        listen 127.0.0.1:\$PORT;
        location /v1/ { llm_api main; }
        location = /healthz { llm_health main; }
    }
EOF

is(nginx_cmd(), 0, 'nginx starts');
ok(wait_healthy(60), 'engine ready');

my $json = JSON::PP->new->canonical;

# POST a chat request; (status, decoded body or undef, raw body)
sub chat {
    my ($fields, $content, $secs) = @_;
    my $req = { model => 'smollm2', temperature => 0, max_tokens => 200,
                messages => [{ role => 'user', content => $content }],
                %$fields };
    my ($st, $body) = http_post('/v1/chat/completions', $json->encode($req),
                                $secs || 120);
    my $d = eval { decode_json($body) };
    return ($st, $d, $body);
}

sub content { $_[0]{choices}[0]{message}{content} }
sub finish { $_[0]{choices}[0]{finish_reason} }

# --- json_object -------------------------------------------------------------

my ($st, $d, $raw) = chat({ response_format => { type => 'json_object' } },
                          'Reply with a JSON object with one key "name" '
                          . 'holding a cat\'s name.');
is($st, 200, 'json_object: 200') or diag($raw);
my $obj = eval { decode_json(content($d)) };
ok(ref $obj eq 'HASH', 'json_object: the content parses as a JSON object')
    or diag(content($d));
is(finish($d), 'stop', 'json_object: finish_reason stop');

# --- json_schema, strict ------------------------------------------------------

my $schema = {
    type => 'object',
    properties => {
        name  => { type => 'string' },
        age   => { type => 'integer' },
        color => { type => 'string', enum => ['red', 'green', 'blue'] },
    },
    required => ['name', 'age', 'color'],
    additionalProperties => JSON::PP::false,
};
my $rf = { type => 'json_schema',
           json_schema => { name => 'pet', strict => JSON::PP::true,
                            schema => $schema } };

# the checks a strict schema promises, by hand
sub pet_ok {
    my ($text) = @_;
    my $v = eval { decode_json($text) };
    return 'not JSON' unless ref $v eq 'HASH';
    for (qw(name age color)) { return "no $_" unless exists $v->{$_} }
    return 'extra keys' if keys %$v != 3;
    my $nr = JSON::PP->new->allow_nonref;
    return 'name not a string' unless $nr->encode($v->{name}) =~ /^"/;
    return 'age not an integer' unless $nr->encode($v->{age}) =~ /^-?\d+$/;
    return 'color not in the enum' unless $v->{color} =~ /^(red|green|blue)$/;
    return '';
}

for my $seed (1 .. 3) {
    ($st, $d, $raw) = chat({ response_format => $rf, temperature => 1,
                             seed => $seed },
                           'Make up a pet.');
    is($st, 200, "json_schema (seed $seed): 200") or diag($raw);
    is(pet_ok(content($d) // ''), '', "json_schema (seed $seed): the output "
       . 'has the schema\'s shape, required keys and enum')
        or diag(content($d));
    is(finish($d), 'stop', "json_schema (seed $seed): finish_reason stop");
}

# --- regex and grammar --------------------------------------------------------

($st, $d, $raw) = chat({ response_format => { type => 'regex',
                                              regex => '[0-9]{3}-[0-9]{4}' } },
                       'Give me a phone number.');
is($st, 200, 'regex: 200') or diag($raw);
like(content($d) // '', qr/^[0-9]{3}-[0-9]{4}\z/, 'regex: the whole output matches');
is(finish($d), 'stop', 'regex: stop when the pattern is complete');

($st, $d, $raw) = chat({ response_format => {
                             type => 'grammar',
                             grammar => 'root ::= "yes" | "no"' } },
                       'Is the sky blue? Answer yes or no.');
is($st, 200, 'grammar: 200') or diag($raw);
like(content($d) // '', qr/^(yes|no)\z/, 'grammar: "' . (content($d) // '') . '"');

# completions take response_format too
my ($cst, $cbody) = http_post('/v1/completions', $json->encode({
    model => 'smollm2', prompt => 'The year was', max_tokens => 20,
    temperature => 0,
    response_format => { type => 'regex', regex => ' (19|20)[0-9]{2}' } }));
my $cd = eval { decode_json($cbody) } || {};
is($cst, 200, 'completions with a regex: 200') or diag($cbody);
like($cd->{choices}[0]{text} // '', qr/^ (19|20)[0-9]{2}\z/,
     'completions: the text matches');

# --- max_tokens: "length", never a silent invalid "stop" ----------------------

($st, $d, $raw) = chat({ response_format => $rf, max_tokens => 3 },
                       'Make up a pet.');
is($st, 200, 'max_tokens 3: 200') or diag($raw);
is(finish($d), 'length', 'max_tokens 3: finish_reason length');
ok(!eval { decode_json(content($d)); 1 }, 'and the cut output is not passed '
   . 'off as complete JSON: ' . (content($d) // ''));

# --- streaming ----------------------------------------------------------------

my $s = open_stream('POST', '/v1/chat/completions', $json->encode({
    model => 'smollm2', stream => JSON::PP::true, temperature => 0,
    max_tokens => 200, response_format => { type => 'json_object' },
    messages => [{ role => 'user', content => 'Reply with a JSON object with '
                   . 'one key "name" holding a dog\'s name.' }] }));
my ($sbody) = read_all($s, 120);
my ($text, $sfinish) = ('', '');
for my $line ($sbody =~ /^data: (\{.*)$/mg) {
    my $c = eval { decode_json($line) } or next;
    $text .= $c->{choices}[0]{delta}{content} // '';
    $sfinish = $c->{choices}[0]{finish_reason} if $c->{choices}[0]{finish_reason};
}
like($sbody, qr/data: \[DONE\]\r?\n\r?\n$/, 'stream: ends with [DONE]');
ok(ref(eval { decode_json($text) }) eq 'HASH', 'stream: the deltas make a JSON '
   . 'object') or diag($text);
is($sfinish, 'stop', 'stream: finish_reason stop');

# --- refusals -----------------------------------------------------------------

sub error_of {
    my ($fields) = @_;
    my ($st, $d, $raw) = chat($fields, 'Hi', 30);
    return ($st, $d && $d->{error} ? $d->{error} : {}, $raw);
}

my ($est, $err, $eraw) = error_of({ response_format => { type => 'json_schema',
    json_schema => { name => 'x', strict => JSON::PP::true,
                     schema => { type => 'array',
                                 contains => { type => 'string' } } } } });
is($est, 400, 'strict, an unsupported keyword: 400') or diag($eraw);
like($err->{message} // '', qr/'contains'/, 'naming the keyword: '
     . ($err->{message} // ''));

($est, $err, $eraw) = error_of({ response_format => { type => 'grammar',
                                                      grammar => 'root ::= (' } });
is($est, 400, 'a grammar that does not parse: 400') or diag($eraw);
like($err->{message} // '', qr/grammar/, 'with the compiler\'s message: '
     . ($err->{message} // ''));
ok(scalar(NgxLlm::Harness::log_lines(qr/constraint refused/)) >= 1,
   'and a line in the log');

($est, $err, $eraw) = error_of({ response_format => { type => 'grammar',
                                                      grammar => 'root ::= (' } });
is($est, 400, 'the same again (cached as refused): 400');

($est, $err) = error_of({ response_format => { type => 'json_schema',
    json_schema => { name => 'big', schema => { type => 'object',
                     description => 'x' x 70000 } } } });
is($est, 400, 'a schema over 64 KiB: 400');
is($err->{param}, 'response_format', 'naming response_format');

($est, $err) = error_of({ response_format => { type => 'json_schema',
    json_schema => { name => 'bad name', schema => {} } } });
is($est, 400, 'a bad json_schema.name: 400');
is($err->{param}, 'response_format.json_schema.name', 'naming it');

($est, $err) = error_of({ response_format => { type => 'xml' } });
is($est, 400, 'an unknown type: 400');
is($err->{param}, 'response_format.type', 'naming response_format.type');

# an unconstrained request still works beside all that
($st, $d) = chat({ max_tokens => 5 }, 'Hi');
is($st, 200, 'a plain request: 200');
is(finish($d), 'length', 'and it ran to max_tokens');

nginx_cmd('-s', 'stop');
done_testing();
