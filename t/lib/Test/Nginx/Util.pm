package Test::Nginx::Util;

# The nginx side of our small Test::Nginx work-alike: settings read from the
# same TEST_NGINX_* environment variables as the CPAN module, the server root
# under t/servroot, the generated nginx.conf, and starting/stopping nginx.
# The HTTP side (requests, responses, checks) is in Test::Nginx::Socket.
#
# Written from Test::Nginx's documented behaviour so that our .t files run
# unchanged under either; see the POD at the end for what is supported.

use strict;
use warnings;

use base 'Exporter';

use Cwd ();
use File::Path qw(make_path remove_tree);
use File::Spec ();
use IO::Socket::INET ();
use POSIX qw(SIGQUIT SIGTERM SIGKILL WNOHANG);
use Time::HiRes qw(sleep time);

our $VERSION = '0.29';    # the Test::Nginx release whose behaviour we follow

our @EXPORT = qw(
    env_to_nginx is_str no_long_string $NoLongString
    server_addr server_name server_port server_port_for_client
    $ServerAddr $ServerName $ServerPort $ServerPortForClient
    $ServRoot $ConfFile $PidFile $ErrLogFile $AccLogFile $HtmlDir $LogDir
    timeout no_shuffle no_nginx_manager use_hup repeat_each $RepeatEach
    worker_connections workers master_on master_off master_process_enabled
    log_level check_accum_error_log no_root_location config_preamble
    html_dir server_root add_block_preprocessor add_cleanup_handler
    bail_out parse_time parse_headers trim show_all_chars
    get_nginx_version get_pid_from_pidfile is_running
    access_log_data error_log_data sleep_time verbose
);

# --- settings (environment first, then the calls in the .t file) ---------

our $Verbose            = $ENV{TEST_NGINX_VERBOSE};
# as the real runner: nginx gets the LD_PRELOAD this module found when it
# was loaded, whatever a test script sets later (set it in a BEGIN block)
our $LdPreload          = $ENV{LD_PRELOAD};
our $NginxBinary        = $ENV{TEST_NGINX_BINARY} || 'nginx';
our $ServerAddr         = '127.0.0.1';
our $ServerName         = 'localhost';
our $ServerPort         = $ENV{TEST_NGINX_SERVER_PORT} || $ENV{TEST_NGINX_PORT}
                          || 1984;
our $ServerPortForClient = $ENV{TEST_NGINX_CLIENT_PORT} || $ServerPort;
our $Timeout            = $ENV{TEST_NGINX_TIMEOUT} || 3;
our $LogLevel           = $ENV{TEST_NGINX_LOG_LEVEL} || 'debug';
our $MasterProcessEnabled = $ENV{TEST_NGINX_MASTER_PROCESS} || 'off';
our $DaemonEnabled      = 'on';
our $Workers            = 1;
our $WorkerConnections  = 64;
our $WorkerUser         = $ENV{TEST_NGINX_WORKER_USER};
our $RepeatEach         = 1;
our $NoShuffle          = $ENV{TEST_NGINX_NO_SHUFFLE} || 0;
our $NoNginxManager     = $ENV{TEST_NGINX_NO_NGINX_MANAGER} || 0;
our $UseHup             = $ENV{TEST_NGINX_USE_HUP};
our $LoadModules        = $ENV{TEST_NGINX_LOAD_MODULES};
our $TestNginxSleep     = $ENV{TEST_NGINX_SLEEP} || 0.015;
our $CheckAccumErrLog   = $ENV{TEST_NGINX_CHECK_ACCUM_ERR_LOG};
our $NoRootLocation     = 0;
our $NoLongString;
our $ConfigPreamble     = '';
our @EnvToNginx;
our @BlockPreprocessors;
our @CleanupHandlers;

# Test::Nginx restarts nginx before every block unless this is 0; with 0 it
# restarts only when the generated nginx.conf differs from the running one.
our $ForceRestartOnTest = defined $ENV{TEST_NGINX_FORCE_RESTART_ON_TEST}
                          ? $ENV{TEST_NGINX_FORCE_RESTART_ON_TEST} : 1;

if (defined $WorkerUser && $WorkerUser !~ /^\w+(?:\s+\w+)?$/) {
    die "Bad value in the env TEST_NGINX_WORKER_USER: $WorkerUser\n";
}

our $ServRoot = $ENV{TEST_NGINX_SERVROOT}
                || File::Spec->rel2abs('t/servroot');
$ENV{TEST_NGINX_SERVER_ROOT} = $ServRoot;

our $LogDir     = "$ServRoot/logs";
our $ErrLogFile = "$LogDir/error.log";
our $AccLogFile = "$LogDir/access.log";
our $HtmlDir    = "$ServRoot/html";
our $ConfDir    = "$ServRoot/conf";
our $ConfFile   = "$ConfDir/nginx.conf";
our $PidFile    = "$LogDir/nginx.pid";

# state of the nginx we manage
our $RunningConf;        # text of the nginx.conf it was started with
our $ErrLogFilePos = 0;  # the next error_log check reads from here
our $NginxVersion;       # canonical, e.g. 1.022001
our $InSubprocess;
our $ConfigVersion;      # HUP mode: the value /ver answers once reloaded

# --- setters used by .t files ---------------------------------------------

sub verbose { $Verbose }
sub sleep_time { $TestNginxSleep }
sub no_long_string () { $NoLongString = 1 }
sub no_shuffle () { $NoShuffle = 1 }
sub no_nginx_manager () { $NoNginxManager = 1 }
sub use_hup () { $UseHup = 1 }
sub no_root_location () { $NoRootLocation = 1 }
sub check_accum_error_log () { $CheckAccumErrLog = 1 }
sub config_preamble ($) { $ConfigPreamble = shift }
sub master_on () { $MasterProcessEnabled = 'on' }
sub master_off () { $MasterProcessEnabled = 'off' }
sub html_dir () { $HtmlDir }
sub server_root () { $ServRoot }
sub add_block_preprocessor (&) { unshift @BlockPreprocessors, shift }
sub add_cleanup_handler ($) { unshift @CleanupHandlers, shift }

sub getset {
    my ($ref, @args) = @_;
    $$ref = shift @args if @args;
    return $$ref;
}

sub server_addr (@) { getset(\$ServerAddr, @_) }
sub server_name (@) { getset(\$ServerName, @_) }
sub server_port (@) { getset(\$ServerPort, @_) }
sub server_port_for_client (@) { getset(\$ServerPortForClient, @_) }
sub timeout (@) { getset(\$Timeout, @_) }
sub repeat_each (@) { getset(\$RepeatEach, @_) }
sub workers (@) { getset(\$Workers, @_) }
sub worker_connections (@) { getset(\$WorkerConnections, @_) }
sub log_level (@) { getset(\$LogLevel, @_) }

sub master_process_enabled (@) {
    $MasterProcessEnabled = $_[0] ? 'on' : 'off' if @_;
    return $MasterProcessEnabled;
}

sub env_to_nginx (@) {
    die "env_to_nginx: no arguments specified\n" unless @_;
    for my $v (@_) {
        die "env_to_nginx: bad argument value: $v\n"
            if $v !~ /^[A-Za-z_]/ || $v =~ /\n/;
        push @EnvToNginx, $v;
    }
}

# --- small helpers ----------------------------------------------------------

sub is_str (@) {
    my ($got, $expected, $desc) = @_;
    if (ref $expected && ref $expected eq 'Regexp') {
        return Test::More::like($got, $expected, $desc);
    }
    if (!$NoLongString && eval { require Test::LongString; 1 }) {
        return Test::LongString::is_string($got, $expected, $desc);
    }
    return Test::More::is($got, $expected, $desc);
}

# "1.5", "1.5s" and "50ms" are seconds 1.5, 1.5 and 0.05
sub parse_time ($) {
    my $tm = shift;
    return $tm unless defined $tm;
    return $1 / 1000 if $tm =~ /^\s*([\d.]+)\s*ms\s*$/;
    return $1 if $tm =~ /^\s*([\d.]+)\s*s?\s*$/;
    return $tm;
}

# "Name: value" lines; "!Name" means the header must be absent (undef)
sub parse_headers ($) {
    my $text = shift;
    my %headers;
    for my $line (split /\n/, $text) {
        $line =~ s/^\s+|\s+$//g;
        next if $line eq '';
        if ($line =~ s/^!\s*//) {
            $headers{$line} = undef;
            next;
        }
        my ($key, $val) = split /\s*:\s*/, $line, 2;
        $headers{$key} = defined $val ? $val : '';
    }
    return \%headers;
}

sub trim ($) {
    my $s = shift;
    return undef unless defined $s;
    $s =~ s/^\s+|\s+$//g;
    $s =~ s/\s+/ /g;
    return $s;
}

sub show_all_chars ($) {
    my $s = shift;
    $s =~ s/\n/\\n/g;
    $s =~ s/\r/\\r/g;
    $s =~ s/\t/\\t/g;
    return $s;
}

sub bail_out (@) {
    cleanup();
    Test::More::BAIL_OUT(join '', @_);
}

sub read_file_text {
    my $path = shift;
    open my $in, '<', $path or return undef;
    local $/;
    my $text = <$in>;
    close $in;
    return $text;
}

sub log_tail {
    my ($path, $n) = @_;
    open my $in, '<', $path or return "(no $path)\n";
    my @lines = <$in>;
    close $in;
    splice @lines, 0, @lines - $n if @lines > $n;
    return join '', @lines;
}

# $TEST_NGINX_FOO in a section becomes the value of that environment
# variable; $TEST_NGINX_RAND_PORT_N a free port, the same within a block.
sub expand_env_in_text ($$$) {
    my ($text, $name, $rand_ports) = @_;
    return undef unless defined $text;
    $text =~ s{\$(TEST_NGINX_[_A-Z0-9]+)}{
        my $var = $1;
        if ($var =~ /^TEST_NGINX_RAND_PORT_\d+$/) {
            $rand_ports->{$var} //= free_port($rand_ports);
        } elsif (!defined $ENV{$var}) {
            bail_out("$name - No environment $var defined.\n");
        } else {
            $ENV{$var};
        }
    }ge;
    return $text;
}

sub free_port {
    my $taken = shift;
    my %used = map { $_ => 1 } ($ServerPort, values %$taken);
    for (1 .. 1000) {
        my $port = 1985 + int rand 63000;
        next if $used{$port};
        my $sock = IO::Socket::INET->new(LocalAddr => $ServerAddr,
                                         LocalPort => $port, Proto => 'tcp');
        next unless $sock;
        close $sock;
        return $port;
    }
    bail_out("cannot find a free port\n");
}

# --- the generated nginx.conf ------------------------------------------------

sub load_module_lines {
    return '' unless $LoadModules;
    return join '', map { "load_module $_;\n" } grep { length } split /\s+/,
        $LoadModules;
}

# The whole nginx.conf for a block, in the shape Test::Nginx writes: main
# settings, main_config, http { http_config server { config } }, events.
sub build_config ($$$) {
    my ($block, $config, $rand_ports) = @_;
    my $name = $block->name;
    my $http_config = expand_env_in_text($block->http_config, $name,
                                         $rand_ports) // '';
    my $main_config = expand_env_in_text($block->main_config, $name,
                                         $rand_ports) // '';
    my $post_main_config = expand_env_in_text($block->post_main_config,
                                              $name, $rand_ports) // '';
    my $server_name = $block->server_name // $ServerName;
    my $log_level = $block->log_level || $LogLevel;
    my $master = $UseHup ? 'on' : $MasterProcessEnabled;
    $config //= '';
    $server_name =~ s/\\/\\\\/g;
    $server_name =~ s/'/\\'/g;

    my $env_lines = join '', map { /\s/ ? "env '$_';\n" : "env $_;\n" }
        qw(LD_PRELOAD LD_LIBRARY_PATH ASAN_OPTIONS), @EnvToNginx;

    my $root_location = $NoRootLocation ? '' : <<"_EOC_";
        location / {
            root $HtmlDir;
            index index.html index.htm;
        }
_EOC_

    # HUP mode: a second server answers /ver with the config version, so
    # we can tell when the reloaded configuration has taken over
    my $ver_server = !$UseHup ? '' : <<"_EOC_";
    server {
        listen          $ServerPort;
        server_name     'Test-Nginx';

        location = /ver {
            return 200 '$ConfigVersion';
        }
    }
_EOC_

    my $user = defined $WorkerUser ? "user $WorkerUser;\n"
             : $> == 0             ? "user root;\n"
             :                       '';

    return load_module_lines() . <<"_EOC_";
worker_processes  $Workers;
daemon $DaemonEnabled;
master_process $master;
error_log $ErrLogFile $log_level;
pid       $PidFile;
$env_lines
$main_config

http {
    access_log $AccLogFile;

    default_type text/plain;
    keepalive_timeout  68;

$http_config

    server {
        listen          $ServerPort;
        server_name     '$server_name';

        client_max_body_size 30M;

        # Begin preamble config...
$ConfigPreamble
        # End preamble config...

        # Begin test case config...
$config
        # End test case config.

$root_location    }
$ver_server}

$post_main_config

events {
    accept_mutex off;

    worker_connections  $WorkerConnections;
}
$user
_EOC_
}

sub write_text ($$) {
    my ($path, $text) = @_;
    open my $out, '>', $path or bail_out("Can't open $path for writing: $!\n");
    binmode $out;
    print $out $text;
    close $out;
}

# Fresh conf/, logs/ and html/ (with index.html) under the server root.
sub setup_server_root () {
    remove_tree($ConfDir, $LogDir, $HtmlDir, glob("$ServRoot/*_temp"));
    for my $dir ($ServRoot, $LogDir, $HtmlDir, $ConfDir) {
        next if -d $dir;
        make_path($dir) or bail_out("Failed to do mkdir $dir: $!\n");
    }
    write_text("$HtmlDir/index.html", '<html><head><title>It works!</title>'
               . '</head><body>It works!</body></html>');
}

# --- user_files: ">>> name [mtime]" followed by the content -------------------

sub write_user_files ($$) {
    my ($block, $rand_ports) = @_;
    my $name = $block->name;
    my $files = $block->user_files;
    return unless $files;

    if (!ref $files) {
        my @list;
        for my $line (split /^/, $files) {
            if ($line =~ /^>>> (\S+)(?:\s+(.+))?/) {
                push @list, [$1, '', $2];
            } elsif (@list) {
                $list[-1][1] .= $line;
            }
        }
        $files = \@list;
    }
    bail_out("$name - user_files must be text or an ARRAY\n")
        if ref $files ne 'ARRAY';

    for my $file (@$files) {
        my ($fname, $body, $date) = @$file;
        my $path = $fname =~ m{^/} ? $fname : "$HtmlDir/$fname";
        (my $dir = $path) =~ s{/[^/]*$}{};
        make_path($dir) unless -d $dir;
        write_text($path, expand_env_in_text($body // '', $name, $rand_ports));
        if ($date) {
            system('touch', '-t', $date, $path) == 0
                or bail_out("$name - touch -t $date $path failed\n");
        }
    }
}

# --- the nginx process ---------------------------------------------------------

sub get_nginx_version () {
    return $NginxVersion if defined $NginxVersion;
    my $out = `$NginxBinary -V 2>&1`;
    if (!defined $out || $? != 0) {
        bail_out("Failed to run \"$NginxBinary -V\" (set TEST_NGINX_BINARY): "
                 . ($out // $!) . "\n");
    }
    if ($out =~ m{/(\d+)\.(\d+)\.(\d+)}) {
        $NginxVersion = sprintf '%d.%03d%03d', $1, $2, $3;
        return $NginxVersion;
    }
    bail_out("Failed to parse the output of \"$NginxBinary -V\": $out\n");
}

sub get_pid_from_pidfile ($) {
    my $text = read_file_text($PidFile);
    return undef unless defined $text;
    $text =~ s/\s+//g;
    return $text =~ /^\d+$/ ? $text : undef;
}

# A daemonized nginx is not our child: once it exits it is a zombie until
# init reaps it, and kill(0) still succeeds on a zombie.
sub is_running ($) {
    my $pid = shift;
    return 0 unless $pid && kill 0, $pid;
    my $stat = read_file_text("/proc/$pid/stat");
    return 1 unless defined $stat;    # no /proc: trust kill(0)
    return $stat =~ /^\d+ \(.*\) ([A-Za-z])/s && $1 ne 'Z' && $1 ne 'X';
}

sub wait_exit ($$) {
    my ($pid, $seconds) = @_;
    my $deadline = time + $seconds;
    while (is_running($pid) && time < $deadline) {
        waitpid($pid, WNOHANG);
        sleep 0.02;
    }
    return !is_running($pid);
}

# QUIT (graceful), then TERM, then KILL; return once the process is gone.
sub stop_nginx ($) {
    my $name = shift;
    my $pid = get_pid_from_pidfile($name);
    if ($pid && is_running($pid)) {
        warn "$name - sending QUIT to nginx $pid\n" if $Verbose;
        kill SIGQUIT, $pid;
        if (!wait_exit($pid, $Timeout)) {
            warn "$name - nginx $pid did not exit after QUIT; sending TERM\n";
            kill SIGTERM, $pid;
            if (!wait_exit($pid, 2)) {
                warn "$name - nginx $pid did not exit after TERM; killing it\n";
                kill SIGKILL, $pid;
                wait_exit($pid, 2);
            }
        }
    }
    unlink $PidFile;
    undef $RunningConf;
}

sub nginx_command () {
    my @cmd = ($NginxBinary, '-p', "$ServRoot/", '-c', $ConfFile);
    # -e (nginx >= 1.19.5) sends what nginx logs before it has read
    # error_log to our error.log too, so must_die blocks can check it
    push @cmd, '-e', $ErrLogFile if get_nginx_version() >= 1.019005;
    return @cmd;
}

# Run nginx (it daemonizes); returns its exit status. Its stderr goes to
# $stderr_path when given.
sub run_nginx (;$) {
    my $stderr_path = shift;
    my @cmd = nginx_command();
    warn "running @cmd\n" if $Verbose;
    my $pid = fork;
    bail_out("fork failed: $!\n") unless defined $pid;
    if ($pid == 0) {
        open STDOUT, '>', '/dev/null';
        open STDERR, '>', $stderr_path if defined $stderr_path;
        if (defined $LdPreload) {
            $ENV{LD_PRELOAD} = $LdPreload;
        } else {
            delete $ENV{LD_PRELOAD};
        }
        exec @cmd or do { print STDERR "exec $cmd[0]: $!\n"; POSIX::_exit(127) };
    }
    waitpid($pid, 0);
    return $?;
}

sub wait_for_pidfile ($) {
    my $name = shift;
    my $deadline = time + $Timeout;
    while (time < $deadline) {
        my $pid = get_pid_from_pidfile($name);
        return $pid if $pid && is_running($pid);
        sleep 0.01;
    }
    bail_out("$name - nginx started but $PidFile did not appear; error.log:\n"
             . log_tail($ErrLogFile, 20));
}

# Stop whatever runs, lay out a fresh server root, write the config and
# start nginx. Retries only while the port is still held by a previous
# instance; any other failure stops the run with nginx's own message.
sub start_nginx ($$$) {
    my ($block, $conf, $rand_ports) = @_;
    my $name = $block->name;
    stop_nginx($name);
    setup_server_root();
    write_user_files($block, $rand_ports);
    write_text($ConfFile, $conf);

    my $deadline = time + 10;
    while (1) {
        my $status = run_nginx();
        if ($status == 0) {
            wait_for_pidfile($name) if $DaemonEnabled eq 'on';
            $RunningConf = $conf;
            sleep $TestNginxSleep;
            return;
        }
        my $log = read_file_text($ErrLogFile) // '';
        if ($log =~ /Address already in use/ && time < $deadline) {
            sleep 0.2;
            next;
        }
        # BAIL_OUT shows one line: put nginx's own complaint in it
        my ($why) = reverse grep { /\[(?:emerg|alert|crit)\]/ }
                    split /\n/, $log;
        bail_out("$name - Cannot start nginx using command \""
                 . join(' ', nginx_command()) . "\" (exit code "
                 . ($status >> 8) . "): " . ($why // 'see error.log') . "\n"
                 . log_tail($ErrLogFile, 20));
    }
}

# HUP mode: rewrite the config, reload the running master and poll the
# 'Test-Nginx' server's /ver until the new configuration answers.
sub reload_nginx ($$$) {
    my ($block, $conf, $rand_ports) = @_;
    my $name = $block->name;
    my $pid = get_pid_from_pidfile($name);
    # as Test::Nginx does: remove the logs and have nginx reopen them
    # (USR1) before the reload, so the reload's lines start a fresh log
    unlink $ErrLogFile, $AccLogFile;
    write_user_files($block, $rand_ports);
    write_text($ConfFile, $conf);
    kill 'USR1', $pid or bail_out("$name - cannot send USR1 to nginx $pid: $!\n");
    sleep $TestNginxSleep;
    kill 'HUP', $pid or bail_out("$name - cannot send HUP to nginx $pid: $!\n");
    # old workers may still answer for a moment: wait for 20 answers in a
    # row from the new configuration, as Test::Nginx does
    my ($deadline, $in_a_row) = (time + 10, 0);
    while (time < $deadline) {
        my $ver = fetch_config_version();
        if (!defined $ver || $ver ne $ConfigVersion) {
            $in_a_row = 0;
            sleep $TestNginxSleep;
            next;
        }
        sleep $TestNginxSleep if ++$in_a_row == 5;
        if ($in_a_row >= 20) {
            $RunningConf = $conf;
            return;
        }
    }
    bail_out("$name - nginx did not reload its configuration within 10 s; "
             . "error.log:\n" . log_tail($ErrLogFile, 20));
}

sub fetch_config_version {
    my $sock = IO::Socket::INET->new(PeerAddr => $ServerAddr,
        PeerPort => $ServerPort, Proto => 'tcp', Timeout => 1) or return undef;
    print $sock "GET /ver HTTP/1.0\r\nHost: Test-Nginx\r\n\r\n";
    local $/;
    my $resp = <$sock>;
    close $sock;
    return undef unless defined $resp && $resp =~ m{\A\S+ 200 .*?\r\n\r\n(.*)\z}s;
    return $1;
}

# Bring nginx to this block's configuration. Returns 1 when nginx was
# (re)started or reloaded, 0 when the running one was kept.
sub prepare_nginx ($$$) {
    my ($block, $config, $rand_ports) = @_;
    my $name = $block->name;
    return 0 if $NoNginxManager;

    $ConfigVersion = join '', map { ('a' .. 'z')[rand 26] } 1 .. 10 if $UseHup;
    my $conf = build_config($block, $config, $rand_ports);
    my $pid = get_pid_from_pidfile($name);
    my $running = $pid && is_running($pid) && defined $RunningConf;

    # a block without --- config keeps the server of the block before it
    return 0 if $running && !defined $block->config;

    if ($running && !$ForceRestartOnTest) {
        # the version string differs every time; compare without it
        (my $a = $conf) =~ s/return 200 '\w+';//;
        (my $b = $RunningConf) =~ s/return 200 '\w+';//;
        return 0 if $a eq $b;
    }
    if ($running && $UseHup) {
        reload_nginx($block, $conf, $rand_ports);
        return 1;
    }
    start_nginx($block, $conf, $rand_ports);
    return 1;
}

# --- logs ---------------------------------------------------------------------

# As Test::Nginx reads it: each read goes on where the one before stopped,
# so the checks after a block's first request see the log from the start
# and each later check only the lines written since; run_test rewinds to 0
# before a block's requests (even when nginx was kept). check_accum_error_log
# makes every read take the whole file.
sub error_log_data () {
    # lines logged after the response was sent (log phase) need a moment
    sleep $TestNginxSleep * 3;
    open my $in, '<', $ErrLogFile or return undef;
    seek $in, $ErrLogFilePos, 0 if !$CheckAccumErrLog && $ErrLogFilePos > 0;
    my @lines = <$in>;
    $ErrLogFilePos = tell $in unless $CheckAccumErrLog;
    close $in;
    return \@lines;
}

sub access_log_data () {
    sleep $TestNginxSleep * 3;
    open my $in, '<', $AccLogFile or return [];
    my @lines = <$in>;
    close $in;
    return \@lines;
}

sub append_error_log_copy ($) {
    my $name = shift;
    my $total = $ENV{TEST_NGINX_ERROR_LOG} or return;
    return unless -s $ErrLogFile;
    open my $out, '>>', $total or bail_out("cannot append to $total: $!\n");
    print $out "\n=== $name\n", read_file_text($ErrLogFile) // '';
    close $out;
}

# --- end of run -------------------------------------------------------------

sub cleanup () {
    $_->() for @CleanupHandlers;
    @CleanupHandlers = ();
}

END {
    return if $InSubprocess;
    local $?;    # keep the test's exit status
    cleanup();
    stop_nginx('END') unless $ENV{TEST_NGINX_NO_CLEAN} || $NoNginxManager;
}

1;

__END__

=head1 NAME

Test::Nginx::Util - nginx management for ngx_llm's Test::Nginx work-alike

=head1 DESCRIPTION

See L<Test::Nginx::Socket>.

=cut
