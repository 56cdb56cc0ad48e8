#!/usr/bin/perl
# POST /v1/rerank (issue 32) through nginx: a score engine (task score)
# serving t/data/models/hf-qwen3-rerank (tools/rerank_oracle.py: a tiny
# random-weight Qwen3 reranker made by transformers) beside an embedder
# and a chat model. Each document's relevance_score is within 1e-3 of
# transformers' softmax([logit(no), logit(yes)])[yes]
# (t/data/rerank/hf-qwen3.json); results sorted, top_n, return_documents,
# usage; the $llm_* variables, llm_token_quota and vLLM's counters count
# it; refusals in OpenAI's error shape (the count, a pair past the ring,
# llm_max_input_tokens, a wrong model, GET), and each endpoint on the
# wrong engine says so. A plain script (as t/038).
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
my $rmodel = "$FindBin::Bin/data/models/hf-qwen3-rerank";
my $emodel = "$FindBin::Bin/data/models/hf-qwen3-embed";

my $port = nginx_setup('rerank', <<"CONF", $ENV{TEST_NGINX_PORT} ? (port => $ENV{TEST_NGINX_PORT}) : ());
    llm_token_quota_zone \$remote_addr zone=keys:1m;
    log_format rr '\$status \$llm_model \$llm_prompt_tokens '
                  '\$llm_completion_tokens \$llm_request_id '
                  '\$llm_quota_remaining';
    llm_engine rerank {
        model $rmodel;
        served_model_name qwen3-rerank;
        task score;
        $binary
        max_model_len 256;
        kv_cache_memory 16m;
    }
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
        access_log logs/rerank.log rr;
        location /v1/ {
            llm_api rerank;
            llm_token_quota zone=keys tokens=1500 per=1d;
        }
        location /small/v1/ {
            llm_api rerank;
            llm_max_input_tokens 300;
        }
        location /free/v1/ { llm_api rerank; }
        location /embed/v1/ { llm_api embed; }
        location /gen/v1/ { llm_api gen; }
        location = /healthz { llm_health rerank; }
        location = /healthz/embed { llm_health embed; }
        location = /healthz/gen { llm_health gen; }
        location = /metrics { llm_metrics; }
    }
CONF

is(nginx_cmd(), 0, 'nginx starts');
ok(wait_healthy(60), 'reranker ready');
for (1 .. 60) {
    last if (http_get('/healthz/embed', 5))[0] == 200
            && (http_get('/healthz/gen', 5))[0] == 200;
    sleep 1;
}
is((http_get('/healthz/embed', 5))[0], 200, 'the embedder beside it ready');
is((http_get('/healthz/gen', 5))[0], 200, 'the chat model beside it ready');

my $json = JSON::PP->new->canonical;
my $golden = do {
    open my $f, '<', "$FindBin::Bin/data/rerank/hf-qwen3.json" or die;
    decode_json(do { local $/; <$f> });
};
my $tol = $golden->{tolerance};

sub post {
    my ($req, $path) = @_;
    my ($st, $body) = http_post($path // '/v1/rerank',
                                ref $req ? $json->encode($req) : $req, 60);
    my $d = eval { decode_json($body) } // {};
    return ($st, $d, $body);
}

my $prompt0 = metric('vllm:prompt_tokens_total', 'engine="rerank"') // 0;
my $ok0 = metric('vllm:request_success_total', 'engine="rerank"') // 0;

# 1. each golden case: every document scored, sorted, within 1e-3
my ($worst, $all_tokens, $n_docs) = (0, 0, 0);
for my $c (@{ $golden->{cases} }) {
    my @docs = map { $_->{document} } @{ $c->{pairs} };
    my %req = (model => 'qwen3-rerank', query => $c->{query},
               documents => \@docs);
    $req{instruction} = $c->{instruction} if exists $c->{instruction};
    my ($st, $d, $raw) = post(\%req);
    is($st, 200, "$c->{query}: 200") or diag($raw);
    is($d->{object}, 'rerank', 'object rerank');
    is($d->{model}, 'qwen3-rerank', 'model');
    like($d->{id} // '', qr/^rerank-[0-9a-f]{16}$/, 'an id');
    my @res = @{ $d->{results} // [] };
    is(scalar @res, scalar @docs, 'a result per document');
    my @want = sort { $c->{pairs}[$b]{score} <=> $c->{pairs}[$a]{score} }
               0 .. $#docs;
    is_deeply([map { $_->{index} } @res], \@want,
              'sorted as transformers\' scores sort them');
    my $tokens = 0;
    for my $r (@res) {
        my $p = $c->{pairs}[$r->{index}];
        my $diff = abs($r->{relevance_score} - $p->{score});
        $worst = $diff if $diff > $worst;
        ok($diff <= $tol, "document $r->{index}: $r->{relevance_score} vs "
           . "transformers $p->{score} ($diff)");
        ok(!exists $r->{document}, 'no document text unless asked');
        $tokens += @{ $p->{ids} };
    }
    is($d->{usage}{prompt_tokens}, $tokens,
       'usage.prompt_tokens: the pairs\' tokens (the golden\'s ids)');
    is($d->{usage}{total_tokens}, $tokens, 'total_tokens');
    $all_tokens += $tokens;
    $n_docs += @docs;
}
note("max |nginx - transformers| over the scores: $worst");

# 2. top_n, return_documents, no model, documents as objects
my $c0 = $golden->{cases}[0];
my @docs0 = map { $_->{document} } @{ $c0->{pairs} };
my ($st, $d, $raw) = post({ query => $c0->{query},
                            documents => [map { { text => $_ } } @docs0],
                            top_n => 1, return_documents => JSON::PP::true });
is($st, 200, 'top_n 1, return_documents, no model: 200') or diag($raw);
is(scalar @{ $d->{results} // [] }, 1, 'one result');
my ($best) = sort { $c0->{pairs}[$b]{score} <=> $c0->{pairs}[$a]{score} }
             0 .. $#docs0;
is($d->{results}[0]{index}, $best, 'the best document');
is($d->{results}[0]{document}{text}, $docs0[$best], 'with its text');

# 3. the counters, the log, the quota
my $t0 = 0;
$t0 += @{ $_->{ids} } for @{ $c0->{pairs} };
is(metric('vllm:prompt_tokens_total', 'engine="rerank"') - $prompt0,
   $all_tokens + $t0, 'vllm:prompt_tokens_total counts every pair\'s tokens');
is(metric('vllm:request_success_total',
          'engine="rerank",finished_reason="stop"') - $ok0,
   $n_docs + @docs0, 'vllm:request_success_total: one per pair');
($st, $d, $raw) = post({ query => $c0->{query}, documents => \@docs0 });
is($st, 429, 'past llm_token_quota (1500 tokens): 429') or diag($raw);
my @log = do {
    open my $f, "<", ($ENV{TEST_NGINX_BUILD} || "build") . "/t/rerank/logs/rerank.log" or die;
    <$f>;
};
my @ours = grep { /^200 qwen3-rerank / } @log;
is(scalar @ours, 3, 'three rerank lines in the access log');
like($ours[0] // '', qr/^200 qwen3-rerank \d+ 0 rerank-[0-9a-f]{16} \d+$/,
     '$llm_prompt_tokens, $llm_completion_tokens 0, $llm_request_id, '
     . '$llm_quota_remaining');
my @p = map { (split ' ')[2] } @ours;
my @q = map { (split ' ')[5] } @ours;
is($p[0] + $p[1], $all_tokens, '$llm_prompt_tokens: the usage\'s');
is($q[2], 1500 - $p[0] - $p[1] - $p[2],
   'llm_token_quota took each request\'s tokens');

# 4. refusals, OpenAI's error shape
my %bad = (
    'no query' => [{ documents => ['a'] }, 400, 'query', qr/query/],
    'no documents' => [{ query => 'q', documents => [] }, 400, 'documents',
                       qr/1\.\.1024/],
    '1025 documents' => [{ query => 'q', documents => [('d') x 1025] }, 400,
                         'documents', qr/1\.\.1024/],
    'an empty document' => [{ query => 'q', documents => ['a', ''] }, 400,
                            'documents[1]', qr/documents\[1\]/],
    'top_n -1' => [{ query => 'q', documents => ['a'], top_n => -1 }, 400,
                   'top_n', qr/top_n/],
    'a model not served' => [{ model => 'x', query => 'q',
                               documents => ['a'] }, 404, undef,
                             qr/does not exist/],
    'a pair past max_model_len 256 (the engine\'s refusal)' =>
        [{ query => 'q', documents => ['a', 'word ' x 200] }, 400, undef,
         qr/documents\[1\].*max_model_len/],
    'broken JSON' => ['{"query":', 400, undef, qr/JSON/],
);
for my $name (sort keys %bad) {
    my ($req, $status, $param, $re) = @{ $bad{$name} };
    ($st, $d, $raw) = post($req, '/free/v1/rerank');
    is($st, $status, "$name: $status");
    like($d->{error}{message} // '', $re, "$name: says why") or diag($raw);
    is($d->{error}{param}, $param, "$name: param") if defined $param;
}
($st, $d, $raw) = post({ query => 'q', documents => [('a b c') x 3] },
                       '/small/v1/rerank');
is($st, 400, 'past llm_max_input_tokens 300: 400');
like($d->{error}{message} // '', qr/documents have \d+ tokens in all, more than the 300/,
     'and says how many') or diag($raw);
my ($gst) = http_get('/v1/rerank');
is($gst, 405, 'GET: 405');

# 5. each endpoint on the wrong engine says so
($st, $d, $raw) = post({ query => 'q', documents => ['a'] },
                       '/embed/v1/rerank');
is($st, 400, 'a rerank to the embedder: 400');
like($d->{error}{message} // '', qr/not a reranker/, 'and says so')
    or diag($raw);
($st, $d, $raw) = post({ query => 'q', documents => ['a'] },
                       '/gen/v1/rerank');
is($st, 400, 'a rerank to the chat model: 400');
like($d->{error}{message} // '', qr/not a reranker/, 'and says so')
    or diag($raw);
($st, $d, $raw) = post({ model => 'qwen3-rerank', input => 'a' },
                       '/v1/embeddings');
is($st, 400, 'an embedding to the reranker: 400');
like($d->{error}{message} // '', qr/a reranker: \/v1\/rerank/, 'and says so')
    or diag($raw);
($st, $d, $raw) = post({ model => 'qwen3-rerank', max_tokens => 2,
                         messages => [{ role => 'user', content => 'hi' }] },
                       '/small/v1/chat/completions');
is($st, 400, 'a chat to the reranker: 400');
like($d->{error}{message} // '', qr/reranker/, 'and says so') or diag($raw);
($st, $d, $raw) = post({ model => 'qwen3-embed', input => 'hello' },
                       '/embed/v1/embeddings');
is($st, 200, 'the embedder beside it answers /v1/embeddings');
($st, $d, $raw) = post({ model => 'smollm2', max_tokens => 2,
                         messages => [{ role => 'user', content => 'hi' }] },
                       '/gen/v1/chat/completions');
is($st, 200, 'the chat model beside it answers');

my @alerts = NgxLlm::Harness::log_lines(qr/\[(?:alert|crit|emerg)\]/);
is(scalar @alerts, 0, 'no alert in the error log (a refusal is answered '
   . 'once)') or diag(join '', @alerts);

is(nginx_cmd('-s', 'quit'), 0, 'nginx stops');

done_testing();
