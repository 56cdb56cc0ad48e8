#!/usr/bin/perl
# Gray release and rollback (docs/operations.md), with
# conf.example/gray-release.conf as it is (only paths, the port, sizes and
# the share substituted, each checked to be present): two engines v1 and
# v2, split_clients by API key. The share of v2 goes 0% -> 10% -> 50% ->
# 100% -> 0% (rollback), one reload each, each reload with 32 streams in
# flight: every stream ends with [DONE], none dropped or failed; the
# share of 100 users moves as configured (users on v2 stay there as it
# widens), and both engines keep their process through every reload.
# Reloads mid-stream, so a plain script (docs/testing.md).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use NgxLlm::Harness;
use File::Path qw(make_path remove_tree);
use IO::Socket::INET;
use Test::More;
use Time::HiRes qw(sleep time);

$ENV{TEST_NGINX_LOAD_MODULES}
    or BAIL_OUT('TEST_NGINX_LOAD_MODULES not set: run the suites with make t-nginx');
$ENV{TEST_NGINX_MODEL}
    or BAIL_OUT('TEST_NGINX_MODEL not set: run the suites with make t-nginx');

my $nginx = $ENV{TEST_NGINX_BINARY} || '/usr/sbin/nginx';
my $build = $ENV{TEST_NGINX_BUILD} || 'build';
my $top = "$build/t/gray-release";
my $prefix = "$top/p";
my $port = $ENV{TEST_NGINX_SERVER_PORT} || 19000 + ($$ + 13) % 1000;
my $example = do {
    open my $f, '<', "$FindBin::Bin/../conf.example/gray-release.conf"
        or die $!;
    local $/;
    <$f>;
};

remove_tree($top);
make_path("$prefix/logs", "$prefix/models", "$top/modules");
symlink($ENV{TEST_NGINX_LOAD_MODULES}, "$top/modules/ngx_http_llm_module.so")
    or die $!;
# one file under two names: two engines, as a rehearsal would run them
symlink($ENV{TEST_NGINX_MODEL}, "$prefix/models/$_.gguf") or die $! for qw(v1 v2);

sub conf {
    my ($share) = @_;
    my $c = $example;
    my %subst = (
        qr/listen  127\.0\.0\.1:8080;/ => "listen  127.0.0.1:$port;",
        # room for 32 streams at once on one engine (32 x 11 blocks)
        qr/kv_cache_memory    256m;/   => 'kv_cache_memory    128m;',
        qr/max_model_len      4096;/   => 'max_model_len      1024;',
        qr/error_log  stderr notice;/  => 'error_log  logs/error.log info;',
        qr/        10%     v2;\n/      => $share == 0 ? ''
                                          : $share == 100 ? "        *       v2;\n"
                                          : "        $share%     v2;\n",
    );
    # 100%: the "*" of v1 must go too (split_clients takes one "*")
    $subst{qr/        \*       v1;\n/} = '' if $share == 100;
    for my $re (keys %subst) {
        $c =~ s/$re/$subst{$re}/g or die "conf.example/gray-release.conf lacks $re";
    }
    open my $f, '>', "$prefix/conf.nginx" or die $!;
    print $f $c;
    close $f;
}

sub nginx { system($nginx, '-p', "$prefix/", '-c', 'conf.nginx', @_) }

sub master {
    open my $f, '<', "$prefix/logs/nginx.pid" or return undef;
    my $pid = <$f>;
    chomp $pid if defined $pid;
    return $pid;
}

sub request {
    my ($method, $path, $body, $user) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port", Proto => 'tcp')
        or die "connect: $!";
    $body //= '';
    print $s "$method $path HTTP/1.0\r\nHost: localhost\r\n"
        . "Authorization: Bearer $user\r\n"
        . "Content-Type: application/json\r\n"
        . "Content-Length: " . length($body) . "\r\n\r\n$body";
    $s->blocking(0);
    return $s;
}

# read every socket to its end: { user => response }
sub collect {
    my ($socks, $secs) = @_;
    my %buf = map { $_ => '' } keys %$socks;
    my %open = %$socks;
    my $deadline = time + $secs;
    while (%open && time < $deadline) {
        for my $u (keys %open) {
            my $n = sysread($open{$u}, my $b, 65536);
            if (defined $n && $n == 0) { delete $open{$u}; next }
            $buf{$u} .= $b if defined $n;
        }
        sleep 0.005;
    }
    return \%buf;
}

sub engine_pid {
    my ($path) = @_;
    my $r = collect({ h => request('GET', $path, undef, 'health') }, 5)->{h};
    return $r =~ /^HTTP\/1\.1 200.*"engine_pid":(\d+)/s ? $1 : undef;
}

sub wait_ready {
    my $deadline = time + 90;
    while (time < $deadline) {
        return 1 if engine_pid('/healthz') && engine_pid('/healthz/v2');
        sleep 0.2;
    }
    return 0;
}

# which version 100 users are sent to: { user => v1|v2 }
sub routes {
    my %socks = map { ("user$_" => request('GET', '/v1/models', undef, "user$_")) } 1 .. 100;
    my $r = collect(\%socks, 30);
    my %v;
    for my $u (keys %$r) {
        $v{$u} = $r->{$u} =~ /^HTTP\/1\.1 200.*\r\nX-LLM-Version: (v[12])\r\n/s
                 ? $1 : 'failed';
    }
    return \%v;
}

# 128 tokens each: at 50% the lighter engine's streams must not end before
# the busier one gave its last stream a first token (CI saw 48 do so)
sub streams {
    my ($tag) = @_;
    my %socks;
    for my $i (1 .. 32) {
        my $user = "user" . (1 + ($i * 3) % 100);
        $socks{"$user/$i"} = request('POST', '/v1/chat/completions',
            '{"model":"smollm2","stream":true,"max_tokens":128,'
            . '"ignore_eos":true,"temperature":0,"messages":[{"role":'
            . qq("user","content":"Hello number $i, $tag"}]}), $user);
    }
    return \%socks;
}

my $t0 = time;
conf(0);
my $out = `$nginx -t -p $prefix/ -c conf.nginx 2>&1`;
ok($? == 0 && $out =~ /test is successful/,
   'conf.example/gray-release.conf passes nginx -t') or diag $out;

is(nginx(), 0, 'nginx starts with 0% on v2');
ok(wait_ready(), 'both engines are ready');
my ($e1, $e2) = (engine_pid('/healthz'), engine_pid('/healthz/v2'));
ok($e1 && $e2 && $e1 != $e2, "two engines: v1 $e1, v2 $e2");

my $prev = routes();
is(scalar(grep { $_ eq 'v1' } values %$prev), 100, '0%: all 100 users on v1');

# step to $share% with 32 streams in flight; then where 100 users go
my %expect = (10 => [3, 20], 50 => [35, 65], 100 => [100, 100], 0 => [0, 0]);
for my $share (10, 50, 100, 0) {
    my $socks = streams("before $share%");
    # the streams are running: headers (and maybe tokens) came, no [DONE]
    my %early = map { $_ => '' } keys %$socks;
    my $deadline = time + 60;
    while (time < $deadline && grep { $_ !~ /^HTTP/ } values %early) {
        for my $k (keys %$socks) {
            my $n = sysread($socks->{$k}, my $b, 65536);
            $early{$k} .= $b if $n;
        }
        sleep 0.01;
    }
    my $old_master = master();
    conf($share);
    kill 'HUP', $old_master;
    is(scalar(grep { /^HTTP\/1\.1 200/ && !/\[DONE\]/ } values %early), 32,
       "$share%: the reload came with all 32 streams started, none done")
        or diag(sprintf '%d without headers, %d done',
                scalar(grep { !/^HTTP/ } values %early),
                scalar(grep { /\[DONE\]/ } values %early));
    my $r = collect($socks, 240);
    $r->{$_} = $early{$_} . $r->{$_} for keys %$r;
    my @bad = grep { $r->{$_} !~ /^HTTP\/1\.1 200.*data: \[DONE\]\r?\n\r?\n\z/s } keys %$r;
    is(scalar @bad, 0, "reload to $share% with 32 streams in flight: all 32 "
                       . 'ended with [DONE]')
        or diag(substr($r->{$bad[0]}, 0, 600));

    # the new workers answer once the old ones are gone or idle
    sleep 1;
    my $now = routes();
    my $n2 = grep { $_ eq 'v2' } values %$now;
    is(scalar(grep { $_ eq 'failed' } values %$now), 0, "$share%: no request failed");
    ok($n2 >= $expect{$share}[0] && $n2 <= $expect{$share}[1],
       "$share%: $n2 of 100 users on v2");
    if ($share > 0 && $share < 100) {
        my @moved_back = grep { $prev->{$_} eq 'v2' && $now->{$_} ne 'v2' } keys %$now;
        is(scalar @moved_back, 0, "$share%: users on v2 before are still on v2");
    }
    is(engine_pid('/healthz'), $e1, "$share%: v1 keeps its engine");
    is(engine_pid('/healthz/v2'), $e2, "$share%: v2 keeps its engine");
    $prev = $now;
}

my $m = master();
kill 'QUIT', $m;
ok(wait_gone(30, $m), 'nginx quits');
ok(wait_gone(10, $e1, $e2), 'both engines exit with it');
diag(sprintf 'gray release test: %.0f s', time - $t0);

done_testing();
