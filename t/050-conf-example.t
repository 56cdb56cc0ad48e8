#!/usr/bin/perl
# The example configurations work: conf.example/nginx.conf (what `make run`
# serves) and conf.example/production.conf pass `nginx -t` with the built
# module; then production.conf runs, on local ports, and does what its
# comments say: TLS, API keys, per-key rate limits, JSON errors, streaming
# through the upstream, the $llm_* access log, /metrics kept private.
#
# Only paths, ports and sizes are substituted, each one checked to be
# present, so an edit of the example that breaks it fails here.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use NgxLlm::Harness;
use File::Path qw(make_path remove_tree);
use Test::More;
use Time::HiRes qw(sleep time);

$ENV{TEST_NGINX_LOAD_MODULES}
    or BAIL_OUT('TEST_NGINX_LOAD_MODULES not set: run the suites with make t-nginx');
$ENV{TEST_NGINX_MODEL}
    or BAIL_OUT('TEST_NGINX_MODEL not set: run the suites with make t-nginx');
$ENV{TEST_NGINX_ENGINE}
    or BAIL_OUT('TEST_NGINX_ENGINE not set: run the suites with make t-nginx');
system('openssl version >/dev/null 2>&1') == 0
    or BAIL_OUT('no openssl command for a test certificate (make deps)');
system('curl --version >/dev/null 2>&1') == 0
    or BAIL_OUT('no curl (make deps installs it)');

my $nginx = $ENV{TEST_NGINX_BINARY} || '/usr/sbin/nginx';
my $build = $ENV{TEST_NGINX_BUILD} || 'build';
my $examples = "$FindBin::Bin/../conf.example";
my $top = "$build/t/conf-example";
remove_tree($top);

sub slurp { open my $f, '<', $_[0] or die "$_[0]: $!"; local $/; <$f> }
sub spew { open my $f, '>', $_[0] or die "$_[0]: $!"; print $f $_[1]; close $f }

# nginx -t as a list of lines; ok when it says "test is successful"
sub nginx_t {
    my ($prefix, $conf, $name) = @_;
    my $out = `$nginx -t -p $prefix/ -e $prefix/logs/error.log -c $conf 2>&1`;
    ok($? == 0 && $out =~ /test is successful/, $name) or diag $out;
}

# --- conf.example/nginx.conf, as `make run` lays it out -----------------------

{
    my $prefix = "$top/run/p";
    make_path("$prefix/logs", "$prefix/models", "$top/run/modules");
    symlink($ENV{TEST_NGINX_LOAD_MODULES},
            "$top/run/modules/ngx_http_llm_module.so") or die $!;
    symlink($ENV{TEST_NGINX_MODEL}, "$prefix/models/default.gguf") or die $!;
    nginx_t($prefix, "$examples/nginx.conf",
            'conf.example/nginx.conf passes nginx -t');
}

# --- the example in docs/directives.md -----------------------------------------

{
    my ($doc) = slurp("$FindBin::Bin/../docs/directives.md")
                =~ /^## Example Configuration\n\n```nginx\n(.*?)^```/ms;
    ok($doc, 'docs/directives.md has an example configuration');
    my $prefix = "$top/doc";
    make_path("$prefix/logs");
    $doc //= '';
    $doc =~ s{^load_module modules/ngx_http_llm_module\.so;}
             {load_module $ENV{TEST_NGINX_LOAD_MODULES};}m
        or fail('the example loads the module');
    $doc =~ s{/var/lib/ngx_llm/SmolLM2-135M-Instruct\.Q4_1\.gguf}
             {$ENV{TEST_NGINX_MODEL}}
        or fail('the example names the model');
    $doc =~ s{(\n\s*served_model_name)}{\n        binary $ENV{TEST_NGINX_ENGINE};$1};
    # its own pid file and access log: nginx's defaults under /run and
    # /var/log are root's
    $doc =~ s#^http \{#http {\n    access_log $prefix/logs/access.log;#m
        or fail('the example has an http block');
    spew("$prefix/nginx.conf",
         "$doc\nevents {}\npid $prefix/logs/nginx.pid;\n");
    nginx_t($prefix, "$prefix/nginx.conf",
            'the example of docs/directives.md passes nginx -t');
}

# --- conf.example/quota.conf (docs/operations.md's worked example) ----------

{
    my $prefix = "$top/quota";
    make_path("$prefix/logs");
    my $conf = slurp("$examples/quota.conf");
    $conf =~ s{/usr/lib/nginx/modules/ngx_http_llm_module\.so}
              {$ENV{TEST_NGINX_LOAD_MODULES}}
        or fail('quota.conf loads the module');
    $conf =~ s{/var/lib/ngx_llm/SmolLM2-135M-Instruct\.Q4_1\.gguf}
              {$ENV{TEST_NGINX_MODEL}}
        or fail('quota.conf names the model');
    $conf =~ s{(\n\s*served_model_name)}{\n        binary $ENV{TEST_NGINX_ENGINE};$1};
    $conf =~ s{/var/log/ngx_llm/}{$prefix/logs/}g
        or fail('quota.conf has log paths');
    $conf =~ s{/run/ngx_llm\.pid}{$prefix/logs/nginx.pid}
        or fail('quota.conf has a pid path');
    $conf =~ s{listen  8080;}{listen  127.0.0.1:@{[22000 + $$ % 1000]};}
        or fail('quota.conf has a listener');
    unlike($conf, qr{(?<![\w.])/(?:etc|var|run|usr)/}, 'quota.conf: no other absolute path');
    spew("$prefix/nginx.conf", $conf);
    nginx_t($prefix, "$prefix/nginx.conf",
            'conf.example/quota.conf passes nginx -t');
}

# --- conf.example/routing-{front,node}.conf (docs/operations.md, Routing) ------

for my $kind (qw(front node)) {
    my $prefix = "$top/routing-$kind";
    make_path("$prefix/logs");
    my $conf = slurp("$examples/routing-$kind.conf");
    $conf =~ s{/usr/lib/nginx/modules/ngx_http_llm_module\.so}
              {$ENV{TEST_NGINX_LOAD_MODULES}}
        or fail("routing-$kind.conf loads the module");
    $conf =~ s{/var/lib/ngx_llm/SmolLM2-135M-Instruct\.Q4_1\.gguf}
              {$ENV{TEST_NGINX_MODEL}}
        or fail("routing-$kind.conf names the model");
    $conf =~ s{(\n\s*served_model_name)}{\n        binary $ENV{TEST_NGINX_ENGINE};$1}
        if $kind eq 'node';
    $conf =~ s{/var/log/ngx_llm/}{$prefix/logs/}g
        or fail("routing-$kind.conf has log paths");
    $conf =~ s{/run/ngx_llm-$kind\.pid}{$prefix/logs/nginx.pid}
        or fail("routing-$kind.conf has a pid path");
    $conf =~ s{listen  808\d;}{listen  127.0.0.1:@{[23000 + $$ % 1000]};}
        or fail("routing-$kind.conf has a listener");
    unlike($conf, qr{(?<![\w.])/(?:etc|var|run|usr)/},
           "routing-$kind.conf: no other absolute path");
    spew("$prefix/nginx.conf", $conf);
    nginx_t($prefix, "$prefix/nginx.conf",
            "conf.example/routing-$kind.conf passes nginx -t");
}

# --- conf.example/retrieval.conf: chat, embedder, reranker side by side ----

{
    my $prefix = "$top/retrieval";
    make_path("$prefix/logs");
    my $conf = slurp("$examples/retrieval.conf");
    my ($api, $ops) = (24000 + $$ % 1000, 25000 + $$ % 1000);
    $conf =~ s{/usr/lib/nginx/modules/ngx_http_llm_module\.so}
              {$ENV{TEST_NGINX_LOAD_MODULES}}
        or fail('retrieval.conf loads the module');
    $conf =~ s{/var/lib/ngx_llm/SmolLM2-135M-Instruct\.Q4_1\.gguf}
              {$ENV{TEST_NGINX_MODEL}}
        or fail('retrieval.conf names the chat model');
    $conf =~ s{/var/lib/ngx_llm/Qwen3-Embedding-0\.6B}
              {$FindBin::Bin/data/models/hf-qwen3-embed}
        or fail('retrieval.conf names the embedder');
    $conf =~ s{/var/lib/ngx_llm/Qwen3-Reranker-0\.6B}
              {$FindBin::Bin/data/models/hf-qwen3-rerank}
        or fail('retrieval.conf names the reranker');
    $conf =~ s{(\n\s*served_model_name)}{\n        binary $ENV{TEST_NGINX_ENGINE};$1}g;
    $conf =~ s{max_model_len       8192;}{max_model_len       256;}g;
    $conf =~ s{kv_cache_memory     \d+[mg];}{kv_cache_memory     64m;}g;
    $conf =~ s{/var/log/ngx_llm/}{$prefix/logs/}g
        or fail('retrieval.conf has log paths');
    $conf =~ s{/run/ngx_llm\.pid}{$prefix/logs/nginx.pid}
        or fail('retrieval.conf has a pid path');
    $conf =~ s{listen  8080;}{listen  127.0.0.1:$api;}
        or fail('retrieval.conf has a listener');
    $conf =~ s{listen  127\.0\.0\.1:9090;}{listen  127.0.0.1:$ops;}
        or fail('retrieval.conf has an operations listener');
    unlike($conf, qr{(?<![\w.])/(?:etc|var|run|usr)/},
           'retrieval.conf: no other absolute path');
    spew("$prefix/nginx.conf", $conf);
    nginx_t($prefix, "$prefix/nginx.conf",
            'conf.example/retrieval.conf passes nginx -t');

    is(system($nginx, '-p', "$prefix/", '-c', "$prefix/nginx.conf"), 0,
       'retrieval.conf runs');
    for my $e (qw(chat embed rerank)) {
        my $up = 0;
        for (1 .. 120) {
            $up = `curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$ops/healthz/$e` eq '200'
                and last;
            sleep 0.5;
        }
        ok($up, "its $e engine is ready");
    }
    my $key = 'Authorization: Bearer sk-REPLACE-ME-0000000000000000';
    my %calls = (
        '/v1/chat/completions' => ['{"model":"smollm2","max_tokens":2,'
            . '"messages":[{"role":"user","content":"Hi"}]}',
            qr/"chat\.completion"/],
        '/v1/embeddings' => ['{"model":"qwen3-embedding","input":"a passage"}',
            qr/"embedding":\[/],
        '/v1/rerank' => ['{"model":"qwen3-reranker","query":"q",'
            . '"documents":["a","b"]}', qr/"relevance_score":/],
    );
    for my $path (sort keys %calls) {
        my ($body, $re) = @{ $calls{$path} };
        my $out = `curl -s -H '$key' -H 'Content-Type: application/json' -d '$body' http://127.0.0.1:$api$path`;
        like($out, $re, "$path answers beside the others");
    }
    my $denied = `curl -s -o /dev/null -w '%{http_code}' -d '{}' http://127.0.0.1:$api/v1/rerank`;
    is($denied, '401', 'without the key: 401');
    is(system($nginx, '-p', "$prefix/", '-c', "$prefix/nginx.conf", '-s',
              'quit'), 0, 'retrieval.conf quits');
    sleep 1;
}

# --- conf.example/production.conf -------------------------------------------

my $prefix = "$top/prod";
make_path("$prefix/logs", "$prefix/tls");
system("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
       . "-nodes -days 2 -subj /CN=llm.example.com "
       . "-keyout $prefix/tls/llm.example.com.key "
       . "-out $prefix/tls/llm.example.com.crt 2>/dev/null") == 0
    or die 'cannot make a test certificate';

my $prod = slurp("$examples/production.conf");

# the placeholders an operator replaces: each must be there
sub subst {
    my ($text, $from, $to, $name) = @_;
    my $n = $text =~ s/\Q$from\E/$to/g;
    ok($n, "production.conf has $name") or diag "missing: $from";
    return $text;
}

my $paths = $prod;
$paths = subst($paths, '/usr/lib/nginx/modules/ngx_http_llm_module.so',
               $ENV{TEST_NGINX_LOAD_MODULES}, 'the module path');
$paths = subst($paths, '/var/lib/ngx_llm/SmolLM2-135M-Instruct.Q4_1.gguf',
               $ENV{TEST_NGINX_MODEL}, 'the model path');
$paths = subst($paths, '/usr/local/lib/ngx_llm/ngx_llm_engine',
               $ENV{TEST_NGINX_ENGINE}, 'the engine binary path');
$paths = subst($paths, '/var/log/ngx_llm/', "$prefix/logs/", 'log paths');
$paths = subst($paths, '/run/ngx_llm.pid', "$prefix/logs/nginx.pid",
               'the pid path');
$paths = subst($paths, '/etc/ngx_llm/tls/', "$prefix/tls/",
               'the TLS certificate paths');
unlike($paths, qr{(?<![\w.])/(?:etc|var|run|usr)/}, 'no other absolute path');

# nginx -t binds the listeners: below 1024 only root may
my $checked = $paths;
if ($> != 0) {
    my $p = 21000 + $$ % 1000 * 3;
    $checked =~ s/listen  443 ssl/listen  127.0.0.1:$p ssl/;
    $checked =~ s/listen  80;/listen  127.0.0.1:@{[$p + 1]};/;
    $checked =~ s/listen  8081;/listen  127.0.0.1:@{[$p + 2]};/;
}
spew("$prefix/nginx-t.conf", $checked);
nginx_t($prefix, "$prefix/nginx-t.conf",
        'production.conf passes nginx -t (only paths replaced, and ports '
        . 'below 1024 when not root)');

# --- production.conf, running on local ports --------------------------------

my $base = 20000 + $$ % 1000 * 3;
my ($tls, $http, $node) = ($base, $base + 1, $base + 2);

my $live = $paths;
$live = subst($live, 'listen  443 ssl', "listen  127.0.0.1:$tls ssl",
              'the TLS listener');
$live = subst($live, 'listen  80;', "listen  127.0.0.1:$http;",
              'the plain HTTP listener');
$live = subst($live, 'listen  8081;', "listen  127.0.0.1:$node;",
              'the node listener');
# both nodes are this one: the upstream still has two servers
$live = subst($live, '10.0.0.11:8081', "127.0.0.1:$node", 'node one');
$live = subst($live, '10.0.0.12:8081', "127.0.0.1:$node", 'node two');
# a CI machine: its cores, a small KV pool
$live = subst($live, 'threads             16;', 'threads 2;', 'threads');
$live = subst($live, 'kv_cache_memory     4g;', 'kv_cache_memory 512m;',
              'the KV size');
spew("$prefix/nginx.conf", $live);

is(system($nginx, '-p', "$prefix/", '-c', "$prefix/nginx.conf"), 0,
   'production.conf starts');
my $master = do { my $p = slurp("$prefix/logs/nginx.pid"); chomp $p; $p };

my $key_a = 'Bearer sk-REPLACE-ME-team-a-0000000000';
my $key_b = 'Bearer sk-REPLACE-ME-team-b-0000000000';

# curl: (status, headers, body); HTTP/2 over TLS where the URL says https
sub request {
    my ($url, %o) = @_;
    my @cmd = ('curl', '-sk', '--max-time', '60', '-D', '-', '-o', '-');
    push @cmd, '-H', "Authorization: $o{key}" if $o{key};
    push @cmd, '-H', 'Content-Type: application/json', '--data-binary',
               $o{body} if defined $o{body};
    open my $c, '-|', @cmd, $url or die "curl: $!";
    my $out = do { local $/; <$c> } // '';
    close $c;
    my ($head, $body) = split /\r\n\r\n/, $out, 2;
    my ($status) = ($head // '') =~ m{^HTTP/[\d.]+ (\d+)};
    return ($status // 0, $head // '', $body // '');
}

my $gw = "https://127.0.0.1:$tls";
my $deadline = time + 60;
my ($st, $head, $body);
while (time < $deadline) {
    ($st) = request("http://127.0.0.1:$node/healthz");
    last if $st == 200;
    sleep 0.1;
}
is($st, 200, 'the node is healthy (/healthz from 127.0.0.1)');

($st, $head, $body) = request("$gw/v1/models", key => $key_a);
is($st, 200, 'TLS gateway: /v1/models with a key');
like($head, qr{^HTTP/2 200}, 'over HTTP/2');
like($body, qr/"id":"smollm2"/, 'lists the model');

($st, $head, $body) = request("$gw/v1/models");
is($st, 401, 'no key: 401');
like($head, qr/\r\nwww-authenticate: Bearer realm="llm"/i, 'with WWW-Authenticate');
is($body, '{"error":{"message":"invalid or missing API key","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}' . "\n",
   'as OpenAI JSON');
($st) = request("$gw/v1/models", key => 'Bearer sk-wrong');
is($st, 401, 'a wrong key: 401');

my $chat = '{"model":"smollm2","messages":[{"role":"user","content":"Hi"}],'
         . '"max_tokens":2,"temperature":0%s}';
($st, $head, $body) = request("$gw/v1/chat/completions", key => $key_a,
                              body => sprintf($chat, ''));
is($st, 200, 'a chat completion through the gateway and the upstream');
like($body, qr/"content":"Hello!".*"prompt_tokens":31,"completion_tokens":2/,
     'the greedy reply and its usage');

($st, $head, $body) = request("$gw/v1/chat/completions", key => $key_a,
                              body => sprintf($chat, ',"stream":true'));
is($st, 200, 'a stream through the gateway');
like($head, qr{\r\ncontent-type: text/event-stream}i, 'as server-sent events');
my @chunks = $body =~ /^data: \{/mg;
is(scalar @chunks, 3, 'two token chunks and the final one');
like($body, qr/data: \[DONE\]\n\n$/, 'ending with [DONE]');

($st, $head, $body) = request("$gw/v1/completions", key => $key_a,
                              body => '{"model":"smollm2","prompt":"x","temperature":3}');
is($st, 400, "the node's own errors pass through");
like($body, qr/"code":"decimal_above_max_value"/, 'unchanged');

($st, $head, $body) = request("$gw/metrics", key => $key_a);
is($st, 404, '/metrics is not on the gateway');
($st, $head, $body) = request("$gw/healthz", key => $key_a);
is($st, 404, 'nor /healthz');
($st, $head, $body) = request("http://127.0.0.1:$node/metrics");
is($st, 200, '/metrics on the node, from an allowed address');
like($body, qr/^vllm:request_success_total\{model_name="smollm2",engine="[^"]+",finished_reason="length"\} 2$/m,
     'counts the two requests');

($st, $head) = request("http://127.0.0.1:$http/v1/models");
is($st, 301, 'plain HTTP redirects');
like($head, qr{\r\nlocation: https://127\.0\.0\.1/v1/models}i, 'to https');

# per-key limit: rate 5r/s, burst 20: 40 quick requests cannot all pass,
# and the other key is not affected
my %seen;
my $limited = '';
for (1 .. 40) {
    my ($s, $h, $b) = request("$gw/v1/models", key => $key_b);
    $seen{$s}++;
    $limited = "$h\r\n\r\n$b" if $s == 429;
}
ok($seen{429} && $seen{200} && $seen{200} <= 30,
   "team-b limited: " . join(', ', map { "$seen{$_} x $_" } sort keys %seen));
like($limited, qr/\r\nretry-after: 1\r\n/i, '429 with Retry-After');
like($limited, qr/"type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"/,
     'as OpenAI JSON');
($st) = request("$gw/v1/models", key => $key_a);
is($st, 200, 'team-a is not limited by team-b');

# the logs: the node's carries the $llm_* values, the gateway's the route
sleep 0.2;
my $llm_log = slurp("$prefix/logs/llm.log");
like($llm_log, qr{^127\.0\.0\.1 client=team-a id=[0-9a-f]{32} \[[^]]+\] "POST /v1/chat/completions HTTP/1\.1" 200 \d+ rt=[\d.]+ model=smollm2 prompt=31 completion=2 cached=\d+ ttft=[\d.]+ tpot=[\d.]+ queue=[\d.]+ finish=length llm_id=chatcmpl-[0-9a-f]+$}m,
     'the node logs tokens and timings per request, with the client name');
unlike($llm_log, qr/sk-REPLACE/, 'never the key');
my $gw_log = slurp("$prefix/logs/access.log");
like($gw_log, qr{client=team-a id=[0-9a-f]{32} \[[^]]+\] "POST /v1/chat/completions HTTP/2\.0" 200 \d+ rt=[\d.]+ upstream=127\.0\.0\.1:$node upstream_status=200 }m,
     'the gateway logs the client, the node and its status');
like($gw_log, qr{client=team-b [^\n]*" 429 }, 'and the rate-limited requests');

is(system($nginx, '-p', "$prefix/", '-c', "$prefix/nginx.conf", '-s', 'quit'), 0, 'quit');
ok(wait_gone(15, $master), 'nginx gone');

done_testing();
