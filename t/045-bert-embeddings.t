#!/usr/bin/perl
# POST /v1/embeddings with BERT-family encoders (issue 32) through nginx:
# engines serving the tiny random-weight bert (GGUF F32, CLS pooling) and
# nomic-bert (its Hugging Face directory, mean pooling) of
# tools/bert_oracle.py. The worker tokenizes with WordPiece; each vector
# is within 1e-4 cosine distance of sentence-transformers' encode
# (t/data/embed/bert.json); a text and its ids give the same vector; a
# list gives each input's own vector (batched == alone, bit for bit); an
# input past max_batched_tokens (an encoder's input is one forward) and a
# cross-encoder asked for embeddings or a completion are 400s that say why. The
# tiny cross-encoder (GGUF F32) serves POST /v1/rerank: each score within
# 1e-3 of CrossEncoder.predict, a request of many documents == each
# alone, bit for bit. A plain script (as t/038): it checks bodies with
# Perl.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use NgxLlm::Harness;
use JSON::PP;
use Test::More;

# the golden texts (accents, CJK) in test names
binmode(Test::More->builder->$_, ':encoding(UTF-8)')
    for qw(output failure_output todo_output);

$ENV{TEST_NGINX_LOAD_MODULES}
    or BAIL_OUT('TEST_NGINX_LOAD_MODULES not set: run the suites with make t-nginx');

my $binary = $ENV{TEST_NGINX_ENGINE} ? "binary $ENV{TEST_NGINX_ENGINE};" : '';
my $models = "$FindBin::Bin/data/models";

my $port = nginx_setup('bert', <<"CONF", $ENV{TEST_NGINX_PORT} ? (port => $ENV{TEST_NGINX_PORT}) : ());
    llm_engine bert {
        model $models/hf-bert-embed.gguf;
        served_model_name bert;
        $binary
        max_model_len 128;
        max_batched_tokens 48;
        kv_cache_memory 4m;
    }
    llm_engine nomic {
        model $models/hf-nomic-embed;
        served_model_name nomic;
        $binary
        max_model_len 128;
        kv_cache_memory 4m;
    }
    llm_engine rerank {
        model $models/hf-bert-rerank.gguf;
        served_model_name rerank;
        $binary
        max_model_len 128;
        kv_cache_memory 4m;
    }
    server {
        listen 127.0.0.1:\$PORT;
        location /v1/ { llm_api bert; }
        location /nomic/v1/ { llm_api nomic; }
        location /rerank/v1/ { llm_api rerank; }
        location = /healthz { llm_health bert; }
        location = /healthz/nomic { llm_health nomic; }
        location = /healthz/rerank { llm_health rerank; }
    }
CONF

# an engine's /healthz answers 200 once it is ready
sub ready {
    my ($path) = @_;
    for (1 .. 120) {
        my ($st) = http_get($path, 2);
        return 1 if $st == 200;
        select(undef, undef, undef, 0.5);
    }
    return 0;
}

is(nginx_cmd(), 0, 'nginx starts');
ok(ready('/healthz'), 'bert engine ready');
ok(ready('/healthz/nomic'), 'nomic-bert engine ready');
ok(ready('/healthz/rerank'), 'cross-encoder engine ready');

my $json = JSON::PP->new->utf8->canonical;
my $golden = do {
    open my $f, '<', "$FindBin::Bin/data/embed/bert.json" or die;
    decode_json(do { local $/; <$f> });
};
my %emb = map { $_->{arch} => $_ } @{ $golden->{embedders} };

sub post {
    my ($req, $path) = @_;
    my ($st, $body) = http_post($path // '/v1/embeddings',
                                ref $req ? $json->encode($req) : $req, 60);
    my $d = eval { decode_json($body) } // {};
    return ($st, $d, $body);
}

# 1 - cos(a, b); 9 when the shapes differ
sub cos_dist {
    my ($a, $b) = @_;
    return 9 unless ref $a eq 'ARRAY' && @$a == @$b;
    my ($dot, $na, $nb) = (0, 0, 0);
    for my $i (0 .. $#$a) {
        $dot += $a->[$i] * $b->[$i];
        $na += $a->[$i] ** 2;
        $nb += $b->[$i] ** 2;
    }
    return 1 - $dot / sqrt($na * $nb);
}

for my $t (['bert', 'bert', '/v1/embeddings'],
           ['nomic-bert', 'nomic', '/nomic/v1/embeddings'])
{
    my ($arch, $name, $path) = @$t;
    my @cases = @{ $emb{$arch}{cases} };
    my ($worst, @alone) = (0);

    # each golden text alone: sentence-transformers' vector
    for my $c (@cases) {
        my ($st, $d, $raw) = post({ model => $name, input => $c->{text} },
                                  $path);
        is($st, 200, "$name: \"$c->{text}\": 200") or diag($raw);
        my $v = $d->{data}[0]{embedding};
        push @alone, $v;
        my $cd = cos_dist($v, $c->{vector});
        $worst = $cd if $cd > $worst;
        is($d->{usage}{prompt_tokens}, scalar @{ $c->{ids} },
           "$name: usage counts the WordPiece ids ([CLS] .. [SEP])");
    }
    ok($worst <= 1e-4, "$name: every vector within 1e-4 cosine distance "
       . "of sentence-transformers (max $worst)");
    note("oracle max $name through nginx: cosine distance $worst");

    # ids: the same vector
    my ($st, $d) = post({ model => $name, input => $cases[1]{ids} }, $path);
    is_deeply($d->{data}[0]{embedding}, $alone[1],
              "$name: the golden ids give the text's vector");

    # a list == each alone
    ($st, $d) = post({ model => $name,
                       input => [map { $_->{text} } @cases] }, $path);
    is($st, 200, "$name: a list of " . @cases . ": 200");
    is_deeply([map { $_->{embedding} } @{ $d->{data} }], \@alone,
              "$name: a list == each alone, bit for bit");
}

# an encoder's input is one forward: max_batched_tokens 48 bounds it
my ($st, $d, $raw) = post({ model => 'bert',
                            input => ['a', [(1996) x 60]] });
is($st, 400, 'an input of 60 tokens past max_batched_tokens 48: 400');
like($d->{error}{message} // '', qr/input\[1\].*one forward.*48/,
     'says which input and why') or diag($raw);
($st, $d) = post({ model => 'bert', input => [(1996) x 48] });
is($st, 200, '48 tokens: 200');

# the cross-encoder (GGUF F32) serves /v1/rerank in the batcher: each
# pair's relevance_score within 1e-3 of CrossEncoder.predict (sigmoid of
# transformers' logit), the pair [CLS] q [SEP] d [SEP] read with types
my $rr = $golden->{rerank};
my ($worst, %alone) = (0);
for my $c (@{ $rr->{cases} }) {
    ($st, $d, $raw) = post({ model => 'rerank', query => $c->{query},
                             documents => [$c->{document}] },
                           '/rerank/v1/rerank');
    is($st, 200, "rerank \"$c->{query}\": 200") or diag($raw);
    my $s = $d->{results}[0]{relevance_score};
    $alone{"$c->{query}\0$c->{document}"} = $s;
    my $diff = defined $s ? abs($s - $c->{score}) : 9;
    $worst = $diff if $diff > $worst;
    is($d->{usage}{prompt_tokens}, scalar @{ $c->{ids} },
       'usage counts the pair\'s ids ([CLS] q [SEP] d [SEP])');
}
ok(@{ $rr->{cases} } >= 3 && $worst <= 1e-3, 'every rerank score within '
   . "1e-3 of CrossEncoder.predict (max $worst)");
note("oracle max cross-encoder through nginx: score $worst");

# one query, every document in one request: each == that pair alone
my $q0 = $rr->{cases}[0]{query};
my @docs = map { $_->{document} } @{ $rr->{cases} };
($st, $d, $raw) = post({ model => 'rerank', query => $q0,
                         documents => \@docs }, '/rerank/v1/rerank');
is($st, 200, 'rerank of ' . @docs . ' documents: 200') or diag($raw);
my ($same, $n_same) = (1, 0);
for my $r (@{ $d->{results} // [] }) {
    my $key = "$q0\0$docs[$r->{index}]";
    my $want = $alone{$key};
    unless (defined $want) {
        my ($st1, $d1) = post({ model => 'rerank', query => $q0,
                                documents => [$docs[$r->{index}]] },
                              '/rerank/v1/rerank');
        $want = $d1->{results}[0]{relevance_score};
    }
    $same &&= defined $want && $want == $r->{relevance_score};
    $n_same++;
}
ok($same && $n_same == @docs, 'batched == alone, bit for bit '
   . "($n_same documents)");

# a cross-encoder scores pairs; it gives no embeddings, no generations
($st, $d, $raw) = post({ model => 'rerank', input => 'hello' },
                       '/rerank/v1/embeddings');
is($st, 400, 'an embedding from the cross-encoder: 400');
like($d->{error}{message} // '', qr/a reranker: \/v1\/rerank/,
     'and says so') or diag($raw);
($st, $d, $raw) = post({ model => 'rerank', max_tokens => 2,
                         prompt => 'hi' }, '/rerank/v1/completions');
is($st, 400, 'a completion from the cross-encoder: 400');
like($d->{error}{message} // '', qr/the model is a reranker/,
     'and says the model is a reranker') or diag($raw);

is(nginx_cmd('-s', 'quit'), 0, 'nginx stops');

done_testing();
