package NgxLlm::Harness;

# A real nginx (master + workers) with the module, for the plain prove
# scripts that send signals mid-test (docs/testing.md): start/stop/reload, the
# engine processes behind it, and raw HTTP with arrival times.

use strict;
use warnings;

use Exporter 'import';
use File::Path qw(make_path remove_tree);
use IO::Socket::INET;
use Socket qw(SOL_SOCKET SO_RCVBUF inet_aton pack_sockaddr_in);
use Time::HiRes qw(sleep time);

our @EXPORT = qw(nginx_setup nginx_cmd master_pid alive engines
                 abstract_sockets http_get http_post open_stream read_some
                 read_all wait_healthy wait_gone metric proc_uid);

my ($nginx, $prefix, $port, $model);

# nginx_setup(name, conf body): writes $prefix/conf/nginx.conf; returns port
sub nginx_setup {
    my ($name, $http, %opt) = @_;
    $nginx = $ENV{TEST_NGINX_BINARY} || '/usr/sbin/nginx';
    my $module = $ENV{TEST_NGINX_LOAD_MODULES};
    $model = $opt{model} || $ENV{TEST_NGINX_MODEL};
    $prefix = ($ENV{TEST_NGINX_BUILD} || 'build') . "/t/$name";
    $port = $opt{port} || 19000 + ($$ + length $name) % 1000;
    remove_tree($prefix) unless $opt{keep};
    make_path("$prefix/logs", "$prefix/conf");
    $http =~ s/\$PORT/$port/g;
    $http =~ s/\$MODEL/$model/g;
    open my $f, '>', "$prefix/conf/nginx.conf" or die $!;
    print $f <<"EOF2";
${\($opt{user} ? "user $opt{user};" : '')}
load_module $module;
worker_processes ${\($opt{workers} || 2)};
error_log logs/error.log info;
pid logs/nginx.pid;
events { worker_connections 256; }
http {
    access_log logs/access.log;
$http
}
EOF2
    close $f;
    return $port;
}

sub nginx_cmd {
    return system($nginx, '-p', "$prefix/", '-c', 'conf/nginx.conf', @_);
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
    my $stat = <$f> // '';
    my ($state) = $stat =~ /\) (\S)/;
    return defined $state && $state ne 'Z';  # a zombie is gone
}

# live engine processes of this test's model (of one master if given)
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

# the engine's sockets of nginx $master, waiting up to $wait s for $want
# of them: the kernel drops a closed socket's entry a moment after its
# process is gone, and a worker may connect after another one has served
sub abstract_sockets {
    my ($master, $wait, $want) = @_;
    my $deadline = time + ($wait // 0);
    $want //= 0;
    while (1) {
        open my $f, '<', '/proc/net/unix' or return 0;
        my $n = scalar grep { m{\@ngx_llm/$master/} } <$f>;
        return $n if $n == $want || time >= $deadline;
        sleep 0.05;
    }
}

sub proc_uid {
    my ($pid) = @_;
    open my $f, '<', "/proc/$pid/status" or return -1;
    while (<$f>) { return $1 if /^Uid:\s+(\d+)/ }
    return -1;
}

# a connection with a request sent; rcvbuf shrinks the client's window
sub open_stream {
    my ($method, $path, $body, %opt) = @_;
    # a small receive buffer must be set before connecting: the window is
    # agreed in the handshake
    my $s = IO::Socket::INET->new(Proto => 'tcp') or die "socket: $!";
    setsockopt($s, SOL_SOCKET, SO_RCVBUF, pack('i', $opt{rcvbuf}))
        if $opt{rcvbuf};
    $s->connect(pack_sockaddr_in($port, inet_aton('127.0.0.1')))
        or die "connect: $!";
    $body //= '';
    # HTTP/1.0: the body comes unchunked, as the client reads it
    print $s "$method $path HTTP/1.0\r\nHost: localhost\r\n"
        . "Content-Type: application/json\r\n"
        . "Content-Length: " . length($body) . "\r\n\r\n$body";
    $s->blocking(0);
    return $s;
}

# what arrives within $secs: [[time, bytes], ...], eof flag
sub read_some {
    my ($s, $secs, $until) = @_;
    my (@reads, $eof);
    my $deadline = time + $secs;
    my $all = '';
    while (time < $deadline) {
        my $n = sysread($s, my $buf, 65536);
        if (defined $n && $n == 0) { $eof = 1; last }
        if (defined $n) {
            push @reads, [time, $buf];
            $all .= $buf;
            last if defined $until && $all =~ $until;
            next;
        }
        sleep 0.002;
    }
    return (\@reads, $eof);
}

sub read_all {
    my ($s, $secs) = @_;
    my ($reads, $eof) = read_some($s, $secs);
    return (join('', map { $_->[1] } @$reads), $eof);
}

sub http_request {
    my ($method, $path, $body, $secs) = @_;
    my $s = eval { open_stream($method, $path, $body) } or return (0, '');
    my ($resp) = read_all($s, $secs || 10);
    my ($status) = $resp =~ m{^HTTP/1\.[01] (\d+)};
    my ($rbody) = $resp =~ /\r\n\r\n(.*)$/s;
    return ($status // 0, $rbody // '', $resp);
}

sub http_get { http_request('GET', $_[0], undef, $_[1]) }
sub http_post { http_request('POST', @_) }

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

# a value from /metrics, e.g. metric('vllm:num_requests_running')
sub metric {
    my ($name, $labels) = @_;
    my ($st, $body) = http_get('/metrics', 5);
    $labels //= '';
    for (split /\n/, $body) {
        next if /^#/;
        return $1 if /^\Q$name\E\{[^}]*\Q$labels\E[^}]*\} (\S+)$/;
    }
    return undef;
}

sub prefix { $prefix }

# --- the engine's identity (t/011) and watchdog (t/012) -------------------

push @EXPORT, qw(engine_socket_names worker_pids ring_header log_lines);

# the distinct abstract names of a master's engines in /proc/net/unix
sub engine_socket_names {
    my ($master) = @_;
    open my $f, '<', '/proc/net/unix' or return ();
    my %names = map { m{(\@ngx_llm/$master/\S+)$} ? ($1 => 1) : () } <$f>;
    return sort keys %names;
}

sub worker_pids {
    my ($master) = @_;
    return grep { $_ != $master } map { /^\s*(\d+)/ ? $1 : () }
           `ps -o pid= --ppid $master`;
}

# the first $len bytes of an engine's ring, read through /proc (as root)
sub ring_header {
    my ($pid, $len) = @_;
    opendir my $d, "/proc/$pid/fd" or return undef;
    for my $fd (readdir $d) {
        my $target = readlink "/proc/$pid/fd/$fd" or next;
        next unless $target =~ m{^/memfd:ngx_llm_ring};
        open my $f, '<:raw', "/proc/$pid/fd/$fd" or return undef;
        read($f, my $buf, $len) == $len or return undef;
        return $buf;
    }
    return undef;
}

# the error log's lines that match a pattern
sub log_lines {
    my ($re) = @_;
    open my $f, '<', "$prefix/logs/error.log" or return ();
    return grep { $_ =~ $re } <$f>;
}

1;
