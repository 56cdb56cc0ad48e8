#!/usr/bin/perl
# POST /v1/embeddings (issue 32) through nginx: an engine serving
# t/data/models/hf-qwen3-embed (hf-qwen3 with a sentence-transformers
# modules.json: last token, Normalize) answers OpenAI's request shapes;
# the vector of a golden prompt is within 1e-4 of transformers'
# (t/data/embed/hf-qwen3.json, tools/embed_oracle.py); a text and
# its ids give the same vector, a list gives each input's own vector
# (batched in the engine == alone), base64 is the float32 bytes; errors
# in OpenAI's shape: dimensions on a model not trained for them, a wrong
# model, empty input, GET; a chat to the embedding engine and an
# embedding to a generation engine are 400s that say so. A plain script
# (as t/029): it checks bodies with Perl.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use NgxLlm::Harness;
use NgxLlm::Sdk;
use JSON::PP;
use MIME::Base64;
use Test::More;

$ENV{TEST_NGINX_LOAD_MODULES}
    or BAIL_OUT('TEST_NGINX_LOAD_MODULES not set: run the suites with make t-nginx');
$ENV{TEST_NGINX_MODEL}
    or BAIL_OUT('TEST_NGINX_MODEL not set: run the suites with make t-nginx');

my $binary = $ENV{TEST_NGINX_ENGINE} ? "binary $ENV{TEST_NGINX_ENGINE};" : '';
my $emodel = "$FindBin::Bin/data/models/hf-qwen3-embed";

my $port = nginx_setup('embeddings', <<"CONF", $ENV{TEST_NGINX_PORT} ? (port => $ENV{TEST_NGINX_PORT}) : ());
    llm_engine embed {
        model $emodel;
        served_model_name qwen3-embed;
        $binary
        max_model_len 256;
        kv_cache_memory 16m;
    }
    llm_engine gen {
        model \$MODEL;
        served_model_name smollm2;
        $binary
        max_model_len 512;
        kv_cache_memory 64m;
    }
    server {
        listen 127.0.0.1:\$PORT;
        location /v1/ { llm_api embed; }
        location /gen/v1/ { llm_api gen; }
        location = /healthz { llm_health embed; }
    }
CONF

is(nginx_cmd(), 0, 'nginx starts');
ok(wait_healthy(60), 'embedding engine ready');

my $json = JSON::PP->new->canonical;
my $golden = do {
    open my $f, '<', "$FindBin::Bin/data/embed/hf-qwen3.json" or die;
    decode_json(do { local $/; <$f> });
};
my @cases = @{ $golden->{cases} };

# POST a body (a hash, or raw text); (status, decoded body or {}, raw)
sub post {
    my ($req, $path) = @_;
    my ($st, $body) = http_post($path // '/v1/embeddings',
                                ref $req ? $json->encode($req) : $req, 60);
    my $d = eval { decode_json($body) } // {};
    return ($st, $d, $body);
}

sub max_diff {
    my ($a, $b) = @_;
    return 9e9 unless ref $a eq 'ARRAY' && @$a == @$b;
    my $m = 0;
    for my $i (0 .. $#$a) {
        my $d = abs($a->[$i] - $b->[$i]);
        $m = $d if $d > $m;
    }
    return $m;
}

# 1. a string: OpenAI's shape, the golden's vector
my ($st, $d, $raw) = post({ model => 'qwen3-embed',
                            input => $cases[0]{text} });
is($st, 200, 'a string: 200') or diag($raw);
is($d->{object}, 'list', 'object list');
is($d->{model}, 'qwen3-embed', 'model');
is(scalar @{ $d->{data} // [] }, 1, 'one embedding');
my $e0 = $d->{data}[0] // {};
is($e0->{object}, 'embedding', 'data[0].object');
is($e0->{index}, 0, 'data[0].index');
is(scalar @{ $e0->{embedding} // [] }, 64, '64 floats');
is($d->{usage}{prompt_tokens}, scalar @{ $cases[0]{prompt_ids} },
   'usage.prompt_tokens: the golden prompt\'s token count');
is($d->{usage}{total_tokens}, $d->{usage}{prompt_tokens}, 'total_tokens');
my $diff = max_diff($e0->{embedding}, $cases[0]{last});
ok($diff <= 1e-4, "within 1e-4 of transformers' last-token pooling ($diff)");
my $v0 = $e0->{embedding};

# 2. its ids: the same vector
($st, $d) = post({ model => 'qwen3-embed', input => $cases[0]{prompt_ids} });
is($st, 200, 'token ids: 200');
is_deeply($d->{data}[0]{embedding}, $v0, 'token ids: the same vector');

# 3. a list: each input's own vector, in order
my @alone;
for my $c (@cases) {
    my (undef, $a) = post({ model => 'qwen3-embed', input => $c->{text} });
    push @alone, $a->{data}[0]{embedding};
}
($st, $d) = post({ model => 'qwen3-embed',
                   input => [map { $_->{text} } @cases] });
is($st, 200, 'three strings: 200');
is_deeply([map { $_->{index} } @{ $d->{data} }], [0, 1, 2], 'indexes 0..2');
is_deeply([map { $_->{embedding} } @{ $d->{data} }], \@alone,
          'three in one request == each alone, bit for bit');
my $total = 0;
$total += @{ $_->{prompt_ids} } for @cases;
is($d->{usage}{prompt_tokens}, $total, 'usage counts every input');
($st, $d) = post({ model => 'qwen3-embed',
                   input => [map { $_->{prompt_ids} } @cases] });
is_deeply([map { $_->{embedding} } @{ $d->{data} }], \@alone,
          'an array of id arrays: the same vectors');

# 4. base64: the float32 bytes of the same vector
($st, $d) = post({ model => 'qwen3-embed', input => $cases[0]{text},
                   encoding_format => 'base64' });
is($st, 200, 'base64: 200');
my $bytes = decode_base64($d->{data}[0]{embedding} // '');
is(length $bytes, 256, 'base64: 64 float32');
# the float reply's numbers read back as floats: the same 4 bytes each
ok($bytes eq pack('f<*', @$v0), 'base64: the float vector, bit for bit');

# 5. refusals, OpenAI's error shape
my %bad = (
    'dimensions on a model not trained for them' =>
        [{ model => 'qwen3-embed', input => 'a', dimensions => 16 }, 400,
         'dimensions', qr/does not support matryoshka/],
    'dimensions past the model\'s' =>
        [{ model => 'qwen3-embed', input => 'a', dimensions => 65 }, 400,
         'dimensions', qr/more than the model's 64/],
    'a model not served' =>
        [{ model => 'nope', input => 'a' }, 404, undef, qr/does not exist/],
    'an empty string' =>
        [{ model => 'qwen3-embed', input => '' }, 400, 'input', qr/empty/],
    'an empty list' =>
        [{ model => 'qwen3-embed', input => [] }, 400, 'input', qr/input/],
    'an id past the vocabulary' =>
        [{ model => 'qwen3-embed', input => [605] }, 400, 'input',
         qr/token id/],
    'encoding_format int8' =>
        [{ model => 'qwen3-embed', input => 'a', encoding_format => 'int8' },
         400, 'encoding_format', qr/float/],
    'broken JSON' => ['{"model":', 400, undef, qr/JSON/],
    'an input past max_model_len 256 (the engine\'s refusal)' =>
        [{ model => 'qwen3-embed', input => ['a', [(1) x 300]] }, 400,
         undef, qr/input\[1\].*max_model_len/],
);
for my $name (sort keys %bad) {
    my ($req, $status, $param, $re) = @{ $bad{$name} };
    ($st, $d, $raw) = post($req);
    is($st, $status, "$name: $status");
    like($d->{error}{message} // '', $re, "$name: says why") or diag($raw);
    is($d->{error}{param}, $param, "$name: param")
        if defined $param;
}
my ($gst) = http_get('/v1/embeddings');
is($gst, 405, 'GET: 405');

# 6. the wrong engine for the endpoint, both ways
($st, $d, $raw) = post({ model => 'qwen3-embed', max_tokens => 2,
                         messages => [{ role => 'user', content => 'hi' }] },
                       '/v1/chat/completions');
is($st, 400, 'a chat to the embedding engine: 400');
like($d->{error}{message} // '', qr/embedding model/, 'and says so')
    or diag($raw);
($st, $d, $raw) = post({ model => 'smollm2', input => 'hello' },
                       '/gen/v1/embeddings');
is($st, 400, 'an embedding to a generation engine: 400');
like($d->{error}{message} // '', qr/not an embedding model/, 'and says so')
    or diag($raw);

# 7. the official openai SDK (the venv t/040 makes, made here if missing)
my $build = $ENV{TEST_NGINX_BUILD} || 'build';
my $sdk_version = $ENV{OPENAI_SDK_VERSION} || '3.57.0';
my $python = sdk_venv('openai', "openai==$sdk_version");
$ENV{NGX_LLM_BASE} = "http://127.0.0.1:$port";
$ENV{TEXTS} = $json->encode([map { $_->{text} } @cases]);
$ENV{EXPECT} = $json->encode(\@alone);
sdk_run($python, 'embeddings_sdk.py', timeout => 300, prefix => 'sdk: ');

is(nginx_cmd('-s', 'quit'), 0, 'nginx stops');

done_testing();
