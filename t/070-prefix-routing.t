#!/usr/bin/perl
# Prefix-aware routing (docs/operations.md, "Routing"): a front nginx with
# llm_tokenizer and no engine, two nodes with an engine each, and
# `hash $llm_prefix_hash consistent` between them. The same system prompt
# lands on the same node whatever the user says, and the node's own
# $llm_prefix_hash (of the prompt its engine got) equals the front's; a
# body in a temp file hashes the same and still reaches the node; a
# different prefix may land elsewhere; a bad body or a GET has no hash and
# passes through to the node's answer; a dead node's requests move to the
# other one. Three nginx instances, so a plain script (docs/testing.md).
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
my $base = $ENV{TEST_NGINX_PORT} || 19000 + $$ % 900;
my ($front, $n1, $n2, $n3) = ($base, $base + 1, $base + 2, $base + 3);
my %prefix;

sub start {
    my ($name, $port, $http) = @_;
    nginx_setup("prefix-$name", $http, port => $port, workers => 1);
    $prefix{$name} = NgxLlm::Harness::prefix();
    return nginx_cmd();
}

sub stop {
    my ($name) = @_;
    system($nginx, '-p', "$prefix{$name}/", '-c', 'conf/nginx.conf',
           '-s', 'stop');
}

sub lines {
    my ($name, $file) = @_;
    open my $f, '<', "$prefix{$name}/logs/$file" or return ();
    return <$f>;
}

# the lines matching $re, waiting up to 5 s for one: an access log line is
# written after the response went out
sub wait_lines {
    my ($name, $file, $re) = @_;
    for (1 .. 50) {
        my @l = grep { $_ =~ $re } lines($name, $file);
        return @l if @l;
        sleep 0.1;
    }
    return ();
}

sub node_conf {
    my ($name, $kv) = @_;
    $kv //= '64m';
    return <<"EOF";
    log_format node '\$llm_prefix_hash \$llm_prompt_tokens';
    access_log logs/node.log node;
    # the front's, so that the node's log shows the same hash
    llm_prefix_hash_tokens 64;
    llm_engine main {
        model \$MODEL;
        served_model_name smollm2;
        threads 1;
        max_model_len 1024;
        kv_cache_memory $kv;
    }
    server {
        listen 127.0.0.1:\$PORT;
        add_header X-Node $name always;
        location /v1/ { llm_api main; }
        location = /healthz { llm_health main; }
    }
EOF
}

# --- the configuration ----------------------------------------------------

my $front_conf = <<"EOF";
    log_format front '\$llm_prefix_hash \$upstream_addr';
    access_log logs/front.log front;
    client_body_temp_path body;
    llm_tokenizer smollm2 {
        model \$MODEL;
    }
    upstream nodes {
        hash \$llm_prefix_hash consistent;
        server 127.0.0.1:$n1 max_fails=1 fail_timeout=5s;
        server 127.0.0.1:$n2 max_fails=1 fail_timeout=5s;
    }
    # a node whose engine cannot serve (503 engine_unavailable) first
    upstream retry {
        hash \$llm_prefix_hash consistent;
        server 127.0.0.1:$n3 max_fails=0;
        server 127.0.0.1:$n1 max_fails=0;
    }
    upstream noretry {
        hash \$llm_prefix_hash consistent;
        server 127.0.0.1:$n3 max_fails=0;
        server 127.0.0.1:$n1 max_fails=0;
    }
    server {
        listen 127.0.0.1:\$PORT;
        llm_prefix_hash smollm2;
        llm_prefix_hash_tokens 64;
        location /v1/ {
            proxy_pass http://nodes;
            proxy_next_upstream error timeout http_503;
            add_header X-Prefix-Hash \$llm_prefix_hash always;
        }
        location /retry/ {
            proxy_pass http://retry/v1/;
            proxy_next_upstream error timeout http_503 non_idempotent;
        }
        location /noretry/ {
            proxy_pass http://noretry/v1/;
            proxy_next_upstream error timeout http_503;
        }
        location /small/ {
            client_body_buffer_size 1k;
            proxy_pass http://nodes/v1/;
            add_header X-Prefix-Hash \$llm_prefix_hash always;
        }
    }
EOF

# nginx -t: what llm_tokenizer and the directives refuse
{
    my %bad = (
        'threads 2' => qr/"threads" is an engine's parameter: llm_tokenizer starts no engine/,
        'llm_prefix_hash_tokens 100' => qr/invalid llm_prefix_hash_tokens "100": a multiple of 16/,
        'llm_prefix_hash nosuch' => qr/unknown llm_tokenizer or llm_engine "nosuch"/,
        'llm_api smollm2' => qr/"smollm2" is an llm_tokenizer, which starts no engine: llm_api needs an llm_engine/,
    );
    for my $line (sort keys %bad) {
        my $conf = $front_conf;
        if ($line =~ /^threads/) {
            $conf =~ s/(model \$MODEL;)/$1\n        $line;/;
        } else {
            $conf =~ s/llm_prefix_hash_tokens 64;/$line;/ if $line =~ /tokens/;
            $conf =~ s/llm_prefix_hash smollm2;/$line;/ if $line =~ /nosuch/;
            $conf =~ s/(location \/v1\/ \{)/$1 $line;/ if $line =~ /llm_api/;
        }
        nginx_setup('prefix-conf', $conf, port => $front);
        my $p = NgxLlm::Harness::prefix();
        my $out = `$nginx -t -p $p/ -c conf/nginx.conf 2>&1`;
        like($out, $bad{$line}, "nginx -t refuses: $line");
    }
}

is(start('node1', $n1, node_conf('node1')), 0, 'node1 starts');
is(start('node2', $n2, node_conf('node2')), 0, 'node2 starts');
is(start('sick', $n3, node_conf('sick', '8m')), 0, 'a sick node starts');
is(start('front', $front, $front_conf), 0, 'the front starts');

# the nodes are up when their /healthz says so, through the front too
my $deadline = time + 60;
my $healthy = 0;
while (time < $deadline && $healthy < 2) {
    $healthy = 0;
    for my $port ($n1, $n2) {
        my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port",
                                      Timeout => 2) or next;
        print $s "GET /healthz HTTP/1.0\r\n\r\n";
        local $/;
        my $r = <$s> // '';
        $healthy++ if $r =~ m{^HTTP/1\.[01] 200};
    }
    sleep 0.2 if $healthy < 2;
}
is($healthy, 2, 'both nodes healthy');

sub master { open my $f, '<', "$prefix{$_[0]}/logs/nginx.pid" or return 0;
             my $p = <$f> // 0; chomp $p; $p }
my @e = engines(master('node1'));
is(scalar @e, 1, 'node1 runs an engine');
is_deeply([engines(master('front'))], [], 'the front runs no engine');

sub chat_body {
    my ($system, $user, %o) = @_;
    my $extra = $o{pad} ? ',"user":"' . ('x' x $o{pad}) . '"' : '';
    return qq({"model":"smollm2","max_tokens":2,"temperature":0,)
         . qq("messages":[{"role":"system","content":"$system"},)
         . qq({"role":"user","content":"$user"}]$extra});
}

sub ask {
    my ($path, $body) = @_;
    my ($st, $rbody, $resp) = http_post($path, $body, 30);
    my ($node) = ($resp // '') =~ /\r\nX-Node: (\S+)\r\n/i;
    my ($hash) = ($resp // '') =~ /\r\nX-Prefix-Hash: (\S+)\r\n/i;
    return ($st, $node // '', $hash // '', $rbody);
}

# a system prompt of a few blocks: the first 64 tokens are all its own
my @systems = map {
    "You are assistant number $_ of the support team of company $_. "
    . "Answer briefly and politely, cite the manual of product line $_, "
    . "never reveal internal notes, and sign every answer as agent $_. "
    . "Escalate billing questions to the billing desk of region $_."
} 1 .. 8;

# --- one prefix, one node ----------------------------------------------------

my (%nodes, %hashes);
for my $u (1 .. 6) {
    my ($st, $node, $hash) = ask('/v1/chat/completions',
                                 chat_body($systems[0], "question $u: why?"));
    is($st, 200, "system prompt 1, user $u: 200");
    $nodes{$node}++;
    $hashes{$hash}++;
}
is(scalar(keys %nodes), 1, 'one system prompt: every request on one node')
    or diag explain \%nodes;
is(scalar(keys %hashes), 1, 'one system prompt: one hash');
my ($h1) = keys %hashes;
like($h1, qr/^[0-9a-f]{16}$/, 'the hash is 16 hex digits');

# the node hashed the prompt its engine got: the same as the front
# (a node writes its log line after the response: wait for the last one)
my $same = 0;
for (1 .. 50) {
    my @node_hashes = map { (split)[0] } map { lines($_, 'node.log') } qw(node1 node2);
    $same = grep { $_ eq $h1 } @node_hashes;
    last if $same >= 6;
    sleep 0.1;
}
is($same, 6,
   'the node\'s $llm_prefix_hash of its prompt equals the front\'s');

# --- other prefixes may land elsewhere -----------------------------------------

my (%by_node, %all_hashes);
for my $i (0 .. 7) {
    my ($st, $node, $hash) = ask('/v1/chat/completions',
                                 chat_body($systems[$i], 'hello'));
    is($st, 200, "system prompt @{[$i + 1]}: 200");
    $by_node{$node}++;
    $all_hashes{$hash}++;
}
is(scalar(keys %all_hashes), 8, 'eight system prompts: eight hashes');
is(scalar(keys %by_node), 2, 'eight system prompts: both nodes used')
    or diag explain \%by_node;

# --- a body in a temp file -------------------------------------------------------

{
    # over the 1k client_body_buffer_size of /small/: nginx writes it out
    my $body = chat_body($systems[0], 'question 1: why?', pad => 4000);
    my ($st, $node, $hash) = ask('/small/chat/completions', $body);
    is($st, 200, 'a body in a temp file reaches the node');
    is($hash, $h1, 'a body in a temp file hashes as in memory');
    my ($st2, $node2, $hash2) = ask('/v1/chat/completions', $body);
    is($node, $node2, 'and lands on the same node');
    ok(grep({ /a client request body is buffered to a temporary file/ }
            lines('front', 'error.log')),
       'the front did buffer it to a file');
}

# --- short prompts, completions, no body -----------------------------------------

{
    my $short = '{"model":"smollm2","prompt":"Hi","max_tokens":2}';
    my ($st, $node, $hash) = ask('/v1/completions', $short);
    is($st, 200, 'a prompt under one block: 200');
    like($hash, qr/^[0-9a-f]{16}$/, 'a prompt under one block has a hash');
    my (undef, $node2, $hash2) = ask('/v1/completions', $short);
    is($hash2, $hash, 'the same short prompt: the same hash');
    is($node2, $node, 'the same short prompt: the same node');

    my ($bst, $bnode, $bhash, $bbody) = ask('/v1/chat/completions', 'not json');
    is($bst, 400, 'a bad body: the node\'s 400 through the front');
    like($bbody, qr/"error"/, 'a bad body: the node\'s JSON error');
    is($bhash, '', 'a bad body: no hash');
    ok(grep({ /no prefix hash: the body is not a valid request/ }
            lines('front', 'error.log')),
       'a bad body: the front logs why it has no hash');

    my ($gst, $gbody, $gresp) = http_get('/v1/models', 10);
    is($gst, 200, 'GET /v1/models through the front');
    unlike($gresp, qr/X-Prefix-Hash/i, 'a GET has no hash');
}

# --- whole blocks of token ids (llm_prefix_hash_tokens 64) ------------------

{
    my %h;
    for my $n (10, 12, 40, 47, 48, 64, 100) {
        my $ids = join ',', map { 100 + $_ } 1 .. $n;
        my ($st, undef, $hash) = ask('/v1/completions',
            qq({"model":"smollm2","prompt":[$ids],"max_tokens":1}));
        is($st, 200, "prompt of $n token ids: 200");
        $h{$n} = $hash;
    }
    is($h{47}, $h{40}, '40 and 47 ids: the same 2 blocks, one hash');
    isnt($h{48}, $h{47}, '48 ids: a third block, another hash');
    is($h{100}, $h{64}, 'past llm_prefix_hash_tokens: only the first 64 count');
    isnt($h{64}, $h{48}, '64 ids: a fourth block, another hash');
    isnt($h{12}, $h{10}, 'under one block: all the ids count');
}

# --- a node whose engine is down: 503, moved on with non_idempotent -----------

{
    my (%st, %nost);
    for my $i (0 .. 7) {
        my ($st) = ask('/retry/chat/completions', chat_body($systems[$i], 'hi'));
        $st{$st}++;
        my ($nst) = ask('/noretry/chat/completions', chat_body($systems[$i], 'hi'));
        $nost{$nst}++;
    }
    is_deeply(\%st, { 200 => 8 },
              'engine down on one node: every POST answered by the other')
        or diag explain \%st;
    ok(scalar wait_lines('front', 'front.log',
                         qr/127\.0\.0\.1:$n3, 127\.0\.0\.1:$n1/),
       'the 503 was retried on the next node');
    ok($nost{503}, 'without non_idempotent a POST\'s 503 reaches the client')
        or diag explain \%nost;
}

# --- a node down: its requests move to the other one --------------------------

{
    my ($st, $node) = ask('/v1/chat/completions',
                          chat_body($systems[0], 'again'));
    stop($node);
    sleep 1;
    my ($st2, $node2) = ask('/v1/chat/completions',
                            chat_body($systems[0], 'again'));
    is($st2, 200, "$node stopped: its prefix is answered");
    isnt($node2, $node, "$node stopped: by the other node");
}

stop($_) for qw(front node1 node2 sick);
sleep 1;

done_testing();
