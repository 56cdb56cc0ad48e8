#!/usr/bin/perl
# Who answers at the engine's socket (docs/architecture.md, Identity): its
# abstract name has no permissions and anybody can read it in
# /proc/net/unix, so a worker checks the listener's credentials. An
# impostor that binds the name while the engine restarts, and serves a
# convincing ring, is refused with one error line and never sees a prompt:
# once as another uid, once as the workers' own uid with another pid in
# its ring. The name carries a secret of the master's: two starts of the
# same config give different names, a reload the same. Runs as root
# (setuid, /proc of other users); a plain script (docs/testing.md).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use NgxLlm::Harness;
use POSIX ();
use Test::More;
use Time::HiRes qw(sleep time);

$ENV{TEST_NGINX_LOAD_MODULES}
    or BAIL_OUT('TEST_NGINX_LOAD_MODULES not set: run the suites with make t-nginx');
$ENV{TEST_NGINX_MODEL}
    or BAIL_OUT('TEST_NGINX_MODEL not set: run the suites with make t-nginx');
plan skip_all => 'needs root: it runs processes as other users' if $> != 0;

# the workers run as daemon, impostors as nobody (another user) or daemon
my @daemon = getpwnam('daemon') or BAIL_OUT('no user daemon');
my @nobody = getpwnam('nobody') or BAIL_OUT('no user nobody');
my ($daemon_uid, $daemon_gid) = @daemon[2, 3];
my ($nobody_uid, $nobody_gid) = @nobody[2, 3];

my $conf = <<'EOF';
    llm_engine main {
        model $MODEL;
        max_num_seqs 4;
        ready_timeout 3s;
    }
    server {
        listen 127.0.0.1:$PORT;
        location /v1/ { llm_api main; }
        location = /healthz { llm_health main; }
    }
EOF

my $port = nginx_setup('identity', $conf, user => 'daemon');
my $prefix = NgxLlm::Harness::prefix();
my $chat = '{"model":"main","max_tokens":4,"messages":[{"role":"user","content":"Hi"}]}';

sub wait_name {
    my ($master, $secs) = @_;
    my $deadline = time + $secs;
    while (time < $deadline) {
        my @n = engine_socket_names($master);
        return $n[0] if @n == 1;
        sleep 0.05;
    }
    return undef;
}

# --- the name: the master's secret in it ----------------------------------------

my $name_re = qr{^\@ngx_llm/(\d+)/([0-9a-f]{16})/([0-9a-f]{32})$};

is(nginx_cmd(), 0, 'nginx starts');
my $master = master_pid();
my $e1 = wait_healthy(10);
ok($e1, 'healthy');
my $name1 = wait_name($master, 5) // '';
like($name1, $name_re, "the name has a secret part: $name1");

is(nginx_cmd('-s', 'reload'), 0, 'reload (config unchanged)');
sleep 1;
is(wait_healthy(10), $e1, 'same engine after reload');
is(wait_name($master, 5), $name1, 'same name after reload');

is(nginx_cmd('-s', 'stop'), 0, 'stop');
ok(wait_gone(10, $master), 'master exited');
ok(wait_gone(5, $e1), 'engine exited');

is(nginx_cmd(), 0, 'nginx starts again, same config');
$master = master_pid();
$e1 = wait_healthy(10);
ok($e1, 'healthy');
my $name2 = wait_name($master, 5) // '';
my ($h1, $s1) = $name1 =~ $name_re ? ($2, $3) : ('', '');
my ($h2, $s2) = $name2 =~ $name_re ? ($2, $3) : ('', '');
is($h2, $h1, 'the same config hash');
isnt($s2, $s1, 'but another secret: nobody can bind the name before the engine');

# --- impostors --------------------------------------------------------------------

# A convincing engine: the real ring's sizes (from /proc, as root), READY,
# a fresh heartbeat and sign of life, a HELLO with its memfd; it logs each
# worker that connects and each slot a worker submits.
# (python3 -c: the build folder may be closed to other users)
my $impostor_py = <<'EOF';
import fcntl, mmap, os, select, socket, struct, sys, time
name, hdr_hex, fake_pid, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
hdr = bytes.fromhex(hdr_hex)
version, header_size, slot_size, n_slots = struct.unpack_from('<4I', hdr, 4)
slots_off, total = struct.unpack_from('<QQ', hdr, 24)
fd = os.memfd_create('ngx_llm_ring', os.MFD_ALLOW_SEALING)
os.ftruncate(fd, total)
fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
m = mmap.mmap(fd, total)
m[0:len(hdr)] = hdr
struct.pack_into('<II', m, 48, 2, fake_pid or os.getpid())    # READY, pid
ls = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
ls.bind('\0' + name[1:])
ls.listen(16)
print('listening', os.getpid(), flush=True)
conns, seen, end = [], set(), time.time() + secs
while time.time() < end:
    now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    struct.pack_into('<Q', m, 64, now)                  # heartbeat_ns
    struct.pack_into('<Q', m, header_size - 32, now)    # alive_ns
    r, _, _ = select.select([ls] + conns, [], [], 0.02)
    for s in r:
        if s is ls:
            c, _ = ls.accept()
            print('accept', flush=True)
            msg = struct.pack('<4IQ', 1, version, 1, 0, total)
            try:
                socket.send_fds(c, [msg], [fd])
                conns.append(c)
            except OSError as e:
                print('hello failed', e, flush=True)
        else:
            try:
                data = s.recv(64)
            except OSError:
                data = b''
            if not data:
                conns.remove(s)
    for i in range(n_slots):
        st = struct.unpack_from('<I', m, slots_off + i * slot_size)[0]
        if st == 2 and i not in seen:
            seen.add(i)
            print('prompt in slot', i, flush=True)
EOF

my $hdr = ring_header($e1, 48);
ok(defined $hdr, 'read the ring header sizes of the real engine');

# workers held still while their engine dies and an impostor takes the name
sub impersonate {
    my ($uid, $gid, $fake_pid, $out, @old) = @_;
    my @workers = worker_pids($master);
    kill 'STOP', @workers;
    push @old, engines($master);
    kill 'KILL', @old;
    wait_gone(5, @old);
    # an engine a worker was starting (forked, not yet exec'd) when the
    # workers stopped comes up later and would take the name: kill what
    # appears until the name stays free for a second
    my $deadline = time + 15;
    my $quiet = time;
    while (time < $deadline && time - $quiet < 1) {
        my @late = engines($master);
        if (@late || engine_socket_names($master)) {
            kill 'KILL', @late;
            wait_gone(5, @late);
            $quiet = time;
        }
        sleep 0.05;
    }

    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        open STDOUT, '>', $out or POSIX::_exit(1);
        open STDERR, '>&', \*STDOUT or POSIX::_exit(1);
        $) = "$gid $gid";
        POSIX::setgid($gid);
        POSIX::setuid($uid) or POSIX::_exit(1);
        exec('python3', '-c', $impostor_py, $name2, unpack('H*', $hdr),
             $fake_pid, 30) or POSIX::_exit(1);
    }
    # python's start and a ring-sized memfd take seconds on a loaded machine:
    # the workers stay stopped until the impostor holds the name
    $deadline = time + 20;
    sleep 0.05 until engine_socket_names($master) || time > $deadline;
    kill 'CONT', @workers;
    return $pid;
}

sub impostor_log {
    my ($out) = @_;
    open my $f, '<', $out or return '';
    local $/;
    return <$f> // '';
}

# --- another uid at the name ---------------------------------------------------

my $out1 = "$prefix/impostor-uid.out";
my $imp1 = impersonate($nobody_uid, $nobody_gid, 0, $out1);
is(proc_uid($imp1), $nobody_uid, "an impostor (pid $imp1) runs as nobody");

my $t0 = time;
my ($st, $body) = http_post('/v1/chat/completions', $chat, 10);
is($st, 503, sprintf('a chat request gets 503 (%.1f s, ready_timeout 3 s)', time - $t0));
like($body, qr/"code":"engine_unavailable"/, 'engine_unavailable');
like($body, qr/refused the process at the engine's socket/, 'saying why');

my $log = impostor_log($out1);
like($log, qr/^accept/m, 'the workers reached the impostor');
unlike($log, qr/prompt/, 'the impostor got no prompt');

my @refused = log_lines(qr/\[error\].*llm: refused engine "main": its socket is held by uid $nobody_uid \(pid $imp1\), not by this worker's uid $daemon_uid/);
is(scalar @refused, 2, 'one error line a worker, naming the uid and the pid')
    or diag `grep refused $prefix/logs/error.log`;

# --- the workers' own uid, another pid in the ring ------------------------------------

my $out2 = "$prefix/impostor-pid.out";
my $imp2 = impersonate($daemon_uid, $daemon_gid, 1, $out2, $imp1);
is(proc_uid($imp2), $daemon_uid, "an impostor (pid $imp2) runs as the workers' user");

($st, $body) = http_post('/v1/chat/completions', $chat, 10);
is($st, 503, 'a chat request gets 503');
$log = impostor_log($out2);
like($log, qr/^accept/m, 'the workers reached it');
unlike($log, qr/prompt/, 'it got no prompt');
@refused = log_lines(qr/\[error\].*llm: refused engine "main": its socket is held by pid $imp2, its ring says pid 1$/);
is(scalar @refused, 2, 'one error line a worker, naming both pids')
    or diag `grep refused $prefix/logs/error.log`;

# --- the impostor leaves: a real engine again ------------------------------------------

kill 'KILL', $imp2;
waitpid($_, 0) for $imp1, $imp2;
my $e2 = wait_healthy(15, $e1);
ok($e2, 'a new engine starts once the name is free');
($st) = http_post('/v1/chat/completions', $chat, 20);
is($st, 200, 'and serves');

is(nginx_cmd('-s', 'stop'), 0, 'stop');
ok(wait_gone(10, $master), 'master exited');
ok(wait_gone(5, $e2), 'engine exited');

my @alerts = log_lines(qr/\[(alert|emerg|crit)\]/);
is_deeply(\@alerts, [], 'no alert in the error log');

done_testing();
