#!/usr/bin/perl
# The engine's life beside a real nginx (master process, two workers, run
# as the workers' default user): it starts with nginx but not with -t, is
# back within 10 s after SIGKILL while in-flight requests fail at once,
# survives a reload of an unchanged config (same pid), rolls over when its
# config changes, and leaves no process, socket or shared memory after
# quit or stop. Signals mid-test, so a plain script (docs/testing.md).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use NgxLlm::Harness;
use Test::More;
use Time::HiRes qw(sleep time);

$ENV{TEST_NGINX_LOAD_MODULES}
    or BAIL_OUT('TEST_NGINX_LOAD_MODULES not set: run the suites with make t-nginx');
$ENV{TEST_NGINX_MODEL}
    or BAIL_OUT('TEST_NGINX_MODEL not set: run the suites with make t-nginx');

sub write_conf {
    my ($max_num_seqs, $keep) = @_;
    return nginx_setup('lifecycle', <<"EOF", keep => $keep);
    llm_engine main {
        model \$MODEL;
        max_num_seqs $max_num_seqs;
    }
    server {
        listen 127.0.0.1:\$PORT;
        location /v1/ { llm_api main; }
        location = /healthz { llm_health main; }
    }
EOF
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

my $port;

# --- nginx -t starts nothing ------------------------------------------------

$port = write_conf(64);
my %before = map { $_ => 1 } engines(undef);
is(nginx_cmd('-t', '-q'), 0, 'nginx -t accepts the config');
sleep 0.5;
# engines of earlier tests may still be exiting: only a new one counts
is_deeply([grep { !$before{$_} } engines(undef)], [], 'nginx -t started no engine');

# --- start ---------------------------------------------------------------------

is(nginx_cmd(), 0, 'nginx starts');
my $master = master_pid();
ok($master, "master pid $master");

my $e1 = wait_healthy(10);
ok($e1, 'healthy after start');
is_deeply([engines($master)], [$e1], 'exactly one engine, the one health reports');
is(abstract_sockets($master, 5, 3), 3, 'engine socket: one listener and two workers\' connections')
    or diag `grep ngx_llm /proc/net/unix`;

my $ring = ring_mode($e1);
ok($ring, 'engine holds its ring memfd');
is(sprintf('%o', $ring->[0]), '600', 'ring mapping has mode 0600') if $ring;
my @workers = grep { $_ != $master } map { /^(\d+)/ ? $1 : () }
              `ps -o pid= --ppid $master`;
is($ring->[1], proc_uid($workers[0]), 'ring owned by the worker user') if $ring && @workers;

# --- SIGKILL: in-flight requests fail at once, engine back within 10 s -----------

kill 'STOP', $e1;
my $inflight = open_stream('GET', '/healthz');
sleep 0.2;                       # the ping now waits in the ring
my $t_kill = time;
kill 'KILL', $e1;
my ($resp) = read_all($inflight, 5);
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

# --- log rotation: the engine follows nginx to the new file ---------------------

my $logdir = NgxLlm::Harness::prefix() . '/logs';
rename "$logdir/error.log", "$logdir/error.log.1" or die $!;
is(nginx_cmd('-s', 'reopen'), 0, 'reopen after rotating error.log');
my $reopened = 0;
my $log_deadline = time + 10;
while (!$reopened && time < $log_deadline) {
    sleep 0.2;
    open my $lf, '<', "$logdir/error.log" or next;
    $reopened = grep { /\[notice\] $e2#0: ngx_llm engine "main": reopened the error log/ } <$lf>;
}
ok($reopened, 'the engine writes to the new error.log');

# --- reload, changed config: a new engine, the old one goes ---------------------------

write_conf(32, 1);
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
is(abstract_sockets($master, 3), 0, 'no engine socket left')
    or diag `grep ngx_llm /proc/net/unix`;
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
is(abstract_sockets($master, 3), 0, 'no engine socket left')
    or diag `grep ngx_llm /proc/net/unix`;

open my $log, '<', NgxLlm::Harness::prefix() . "/logs/error.log" or die $!;
my @alerts = grep { /\[(alert|emerg|crit)\]/ } <$log>;
is_deeply(\@alerts, [], 'no alert in the error log');

done_testing();
