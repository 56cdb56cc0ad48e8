#!/usr/bin/perl
# The engine's life beside a real nginx (master process, two workers, run
# as the workers' default user): it starts with nginx but not with -t, is
# back within 10 s after SIGKILL while in-flight requests fail at once,
# survives a reload of an unchanged config (same pid), rolls over when its
# config changes, and leaves no process, socket or shared memory after
# quit or stop. Signals mid-test, so a plain script (BRIEF 9.3).
use strict;
use warnings;

use File::Path qw(make_path remove_tree);
use IO::Socket::INET;
use POSIX qw(WNOHANG);
use Test::More;
use Time::HiRes qw(sleep time);

my $nginx = $ENV{TEST_NGINX_BINARY} || '/usr/sbin/nginx';
my $module = $ENV{TEST_NGINX_LOAD_MODULES} or plan skip_all => 'no module';
my $model = $ENV{TEST_NGINX_MODEL} or plan skip_all => 'no model';
my $build = $ENV{TEST_NGINX_BUILD} || 'build';
my $prefix = "$build/t/lifecycle";
my $port = 19000 + $$ % 1000;

remove_tree($prefix);
make_path("$prefix/logs", "$prefix/conf");

sub write_conf {
    my ($max_num_seqs) = @_;
    open my $f, '>', "$prefix/conf/nginx.conf" or die $!;
    print $f <<"EOF";
load_module $module;
worker_processes 2;
error_log logs/error.log info;
pid logs/nginx.pid;
events { worker_connections 64; }
http {
    access_log logs/access.log;
    llm_engine main {
        model $model;
        max_num_seqs $max_num_seqs;
    }
    server {
        listen 127.0.0.1:$port;
        location /v1/ { llm_api main; }
        location = /healthz { llm_health main; }
    }
}
EOF
    close $f;
}

sub nginx_cmd {
    my @args = @_;
    return system($nginx, '-p', "$prefix/", '-c', 'conf/nginx.conf', @args);
}

sub master_pid {
    open my $f, '<', "$prefix/logs/nginx.pid" or return undef;
    my $pid = <$f>;
    chomp $pid if defined $pid;
    return $pid;
}

sub alive {
    my ($pid) = @_;
    open my $f, '<', "/proc/$pid/stat" or return 0;
    my $stat = <$f>;
    return 0 unless $stat;
    my ($state) = $stat =~ /\) (\S)/;
    return $state ne 'Z';    # a zombie is gone, whoever reaps it
}

# live engine processes serving this test's nginx (any master pid if undef)
sub engines {
    my ($master) = @_;
    my @pids;
    opendir my $d, '/proc' or die $!;
    for my $pid (grep { /^\d+$/ } readdir $d) {
        open my $f, '<', "/proc/$pid/cmdline" or next;
        my $cmd = do { local $/; <$f> } // '';
        next unless $cmd =~ /^ngx_llm_engine\0serve\0/;
        next unless $cmd =~ /\Q$model\E/;
        next if defined $master && $cmd !~ m{ngx_llm/$master/};
        push @pids, $pid if alive($pid);
    }
    return sort @pids;
}

sub abstract_sockets {
    my ($master) = @_;
    open my $f, '<', '/proc/net/unix' or return 0;
    return scalar grep { m{\@ngx_llm/$master/} } <$f>;
}

sub http_get {
    my ($path, $timeout) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port",
                                  Timeout => 2) or return (0, '');
    print $s "GET $path HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    my $resp = '';
    my $deadline = time + ($timeout || 5);
    $s->blocking(0);
    while (time < $deadline) {
        my $n = sysread($s, my $buf, 65536);
        if (defined $n && $n == 0) { last }
        if (defined $n) { $resp .= $buf; next }
        sleep 0.01;
    }
    my ($status) = $resp =~ m{^HTTP/1\.1 (\d+)};
    my ($body) = $resp =~ /\r\n\r\n(.*)$/s;
    return ($status // 0, $body // '');
}

sub wait_healthy {
    my ($secs, $not_pid) = @_;
    my $deadline = time + $secs;
    while (time < $deadline) {
        my ($st, $body) = http_get('/healthz', 2);
        if ($st == 200 && $body =~ /"engine_pid":(\d+)/) {
            return $1 if !defined $not_pid || $1 != $not_pid;
        }
        sleep 0.05;
    }
    return undef;
}

sub wait_gone {
    my ($secs, @pids) = @_;
    my $deadline = time + $secs;
    while (time < $deadline) {
        return 1 unless grep { alive($_) } @pids;
        sleep 0.05;
    }
    return 0;
}

sub ring_mode {
    my ($pid) = @_;
    opendir my $d, "/proc/$pid/fd" or return undef;
    for my $fd (readdir $d) {
        my $target = readlink "/proc/$pid/fd/$fd" or next;
        next unless $target =~ m{^/memfd:ngx_llm_ring};
        my @st = stat "/proc/$pid/fd/$fd" or next;
        return [$st[2] & 07777, $st[4]];
    }
    return undef;
}

sub proc_uid {
    my ($pid) = @_;
    open my $f, '<', "/proc/$pid/status" or return -1;
    while (<$f>) { return $1 if /^Uid:\s+(\d+)/ }
    return -1;
}

# --- nginx -t starts nothing ------------------------------------------------

write_conf(64);
my @before = engines(undef);
is(nginx_cmd('-t', '-q'), 0, 'nginx -t accepts the config');
sleep 0.5;
is_deeply([engines(undef)], \@before, 'nginx -t started no engine');

# --- start ---------------------------------------------------------------------

is(nginx_cmd(), 0, 'nginx starts');
my $master = master_pid();
ok($master, "master pid $master");

my $e1 = wait_healthy(10);
ok($e1, 'healthy after start');
is_deeply([engines($master)], [$e1], 'exactly one engine, the one health reports');
is(abstract_sockets($master), 3, 'engine socket: one listener and two workers\' connections')
    or diag `grep ngx_llm /proc/net/unix`;

my $ring = ring_mode($e1);
ok($ring, 'engine holds its ring memfd');
is(sprintf('%o', $ring->[0]), '600', 'ring mapping has mode 0600') if $ring;
my @workers = grep { $_ != $master } map { /^(\d+)/ ? $1 : () }
              `ps -o pid= --ppid $master`;
is($ring->[1], proc_uid($workers[0]), 'ring owned by the worker user') if $ring && @workers;

# --- SIGKILL: in-flight requests fail at once, engine back within 10 s -----------

kill 'STOP', $e1;
my $inflight = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port") or die;
print $inflight "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
sleep 0.2;                       # the ping now waits in the ring
my $t_kill = time;
kill 'KILL', $e1;
my $resp = '';
$inflight->blocking(1);
while (my $n = sysread($inflight, my $buf, 65536)) { $resp .= $buf }
my $took = time - $t_kill;
like($resp, qr{^HTTP/1\.1 503}, 'in-flight request ends with 503');
like($resp, qr{"reason":"engine exited"}, 'and says the engine exited');
cmp_ok($took, '<', 0.5, sprintf('at once (%.3f s, ping timeout is 1 s)', $took));

my $t0 = time;
my $e2 = wait_healthy(10, $e1);
ok($e2, sprintf('engine back and healthy after SIGKILL in %.2f s', time - $t0));
is_deeply([engines($master)], [$e2], 'one engine after the restart');

# --- reload, same config: same engine -----------------------------------------------

my @old_workers = @workers;
is(nginx_cmd('-s', 'reload'), 0, 'reload (config unchanged)');
ok(wait_gone(10, @old_workers), 'old workers exited');
is(wait_healthy(10), $e2, 'same engine pid after reload');
is_deeply([engines($master)], [$e2], 'still exactly one engine');

# --- reload, changed config: a new engine, the old one goes ---------------------------

write_conf(32);
is(nginx_cmd('-s', 'reload'), 0, 'reload (engine config changed)');
my $e3 = wait_healthy(10, $e2);
ok($e3, 'a new engine serves the new config');
ok(wait_gone(10, $e2), 'the old engine exits once its workers are gone');
is_deeply([engines($master)], [$e3], 'one engine after the roll-over');

# --- quit: nothing left -------------------------------------------------------

is(nginx_cmd('-s', 'quit'), 0, 'quit');
ok(wait_gone(10, $master), 'master exited');
ok(wait_gone(5, $e3), 'engine exited with nginx');
is_deeply([engines($master)], [], 'no engine process left');
is(abstract_sockets($master), 0, 'no engine socket left');
my @shm = glob('/dev/shm/*ngx_llm*');
is_deeply(\@shm, [], 'no shared memory file left');

# --- stop: nothing left either ---------------------------------------------------

is(nginx_cmd(), 0, 'nginx starts again');
$master = master_pid();
my $e4 = wait_healthy(10);
ok($e4, 'healthy');
is(nginx_cmd('-s', 'stop'), 0, 'stop');
ok(wait_gone(10, $master), 'master exited');
ok(wait_gone(5, $e4), 'engine exited with nginx');
is(abstract_sockets($master), 0, 'no engine socket left');

open my $log, '<', "$prefix/logs/error.log" or die $!;
my @alerts = grep { /\[(alert|emerg|crit)\]/ } <$log>;
is_deeply(\@alerts, [], 'no alert in the error log');

done_testing();
