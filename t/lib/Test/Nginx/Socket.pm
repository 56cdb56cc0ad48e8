package Test::Nginx::Socket;

# ngx_llm's work-alike of CPAN's Test::Nginx::Socket: the subset of its
# data-block format our suites use, on Debian's Test::Base, so that every
# t/*.t file runs unchanged under the real module too. Behaviour (section
# names, defaults, environment variables, assertion names) follows the real
# module's documentation; see the POD at the end for the supported subset.
#
# Per block: bring nginx to the block's config (Test::Nginx::Util), send
# each request over one HTTP/1.1 "Connection: close" socket, parse the
# response, then run one TAP assertion per check.

use strict;
use warnings;

use Test::Base -base;    # lower-case: no Spiffy source filter

use IO::Select ();
use IO::Socket::INET ();
use List::Util qw(min shuffle);
use POSIX qw(EAGAIN EINTR);
use Scalar::Util qw(looks_like_number);
use Time::HiRes qw(sleep time);

use Test::Nginx::Util;

our $VERSION = '0.29';

our @EXPORT = qw(
    plan run_tests run_test blocks env_to_nginx is_str no_long_string
    repeat_each config_preamble worker_connections workers
    master_process_enabled master_on master_off log_level no_shuffle
    no_root_location use_hup server_name server_addr server_root html_dir
    server_port server_port_for_client timeout no_nginx_manager
    check_accum_error_log add_block_preprocessor bail_out
    add_cleanup_handler add_response_body_check
);

our @ResponseBodyChecks;
our $PrevConfig;

# lets a .t file tell this runner from the real one (skip_eval)
our $NgxLlmWorkAlike = 1;

sub add_response_body_check ($) {
    push @ResponseBodyChecks, shift;
}


# --- entry point --------------------------------------------------------------

sub run_tests () {
    get_nginx_version() unless $Test::Nginx::Util::NoNginxManager;
    $ENV{TEST_NGINX_SERVER_PORT} //= $ServerPort;

    my @blocks = Test::Base::blocks();
    @blocks = shuffle @blocks unless $Test::Nginx::Util::NoShuffle;

    for my $block (@blocks) {
        $_->($block) for @Test::Nginx::Util::BlockPreprocessors;
        $block->set_value('name', "$0 " . $block->name);
        run_test($block);
    }
    Test::Nginx::Util::cleanup();
}

sub run_test ($) {
    my $block = shift;
    return if defined $block->SKIP;

    my $name = $block->name;
    my $rand_ports = {};
    my $config = $block->config;

    if (defined $config) {
        $config = Test::Nginx::Util::expand_env_in_text($config, $name,
                                                        $rand_ports);
    } elsif (defined $PrevConfig || $Test::Nginx::Util::NoNginxManager) {
        $config = $PrevConfig;
    } else {
        bail_out("$name - No '--- config' section specified and could not "
                 . "get previous one.\n");
    }
    $PrevConfig = $config;

    my $skip = skip_count($block);
    if ($skip) {
        SKIP: { Test::More::skip("$name - $skip->[1]", $skip->[0]) }
        return;
    }

    if (defined $block->must_die) {
        run_must_die($block, $config, $rand_ports);
        return;
    }

    Test::Nginx::Util::prepare_nginx($block, $config, $rand_ports);

    if (defined $block->init) {
        eval $block->init;
        bail_out("$name - init failed: $@") if $@;
    }

    # Test::Nginx reads a block's error log from the start of the file,
    # even when nginx was kept and the file holds earlier blocks' lines
    $Test::Nginx::Util::ErrLogFilePos = 0;

    for my $i (0 .. $RepeatEach - 1) {
        Test::Nginx::Util::write_user_files($block, $rand_ports) if $i > 0;
        run_requests($block, $i);
    }

    Test::Nginx::Util::append_error_log_copy($name);
}

# --- skip_eval / skip_nginx: [count, reason] when the block is skipped ---------

sub skip_count ($) {
    my $block = shift;
    my $name = $block->name;

    if (defined(my $spec = $block->skip_eval)) {
        $spec =~ /^\s*(\d+)\s*:\s*(.*)/s
            or bail_out("$name - Invalid --- skip_eval spec: $spec\n");
        my ($count, $code) = ($1, $2);
        my $yes = eval $code;
        bail_out("$name - skip_eval - failed to eval \"$code\": $@") if $@;
        return $yes ? [$count, 'skip_eval'] : undef;
    }

    if (defined(my $spec = $block->skip_nginx)) {
        $spec =~ /^\s*(\d+)\s*:\s*([<>]=?)\s*(\d+)\.(\d+)\.(\d+)
                  (?:\s*:\s*(.*))?\s*$/x
            or bail_out("$name - Invalid --- skip_nginx spec: $spec\n");
        my ($count, $op) = ($1, $2);
        my $reason = $6 || "nginx version $op $3.$4.$5";
        my $ver = sprintf '%d.%03d%03d', $3, $4, $5;
        my $have = get_nginx_version();
        return eval "$have $op $ver" ? [$count, $reason] : undef;
    }

    return undef;
}

# --- must_die: nginx has to refuse to start --------------------------------------

sub run_must_die ($$$) {
    my ($block, $config, $rand_ports) = @_;
    my $name = $block->name;
    my $must_die = $block->must_die;
    my $conf = Test::Nginx::Util::build_config($block, $config, $rand_ports);

    for my $i (0 .. $RepeatEach - 1) {
        Test::Nginx::Util::stop_nginx($name);
        Test::Nginx::Util::setup_server_root();
        Test::Nginx::Util::write_user_files($block, $rand_ports);
        Test::Nginx::Util::write_text($Test::Nginx::Util::ConfFile, $conf);
        $Test::Nginx::Util::ErrLogFilePos = 0;

        # nginx also prints the expected failure on stderr: keep it quiet
        my $status = Test::Nginx::Util::run_nginx('/dev/null');
        my $exit_code = $status >> 8;

        if (looks_like_number($must_die)) {
            Test::More::is($exit_code, $must_die,
                           "$name - die with the expected exit code");
        } else {
            Test::More::isnt($status, 0, "$name - die as expected");
        }

        check_error_log($block, $i, 1);

        if ($status == 0) {
            warn "WARNING: $name - nginx must die but it does not; "
                 . "stopping it\n";
            Test::Nginx::Util::wait_for_pidfile($name);
            Test::Nginx::Util::stop_nginx($name);
        }
    }
}

# --- requests ---------------------------------------------------------------------

# "Key: value" lines of --- more_headers as CRLF-terminated header lines;
# lines starting with # are comments.
sub format_more_headers ($) {
    my $text = shift;
    my ($out, $chunked) = ('', 0);
    for my $line (split /\n+/, $text) {
        next if $line =~ /^\s*#/;
        my ($key, $val) = split /:\s*/, $line, 2;
        $val //= '';
        $chunked = 1 if lc $key eq 'transfer-encoding' && $val eq 'chunked';
        $out .= "$key: $val\r\n";
    }
    return ($out, $chunked);
}

# "METHOD [URI [VERSION]]" on the first line, the body after it. Adds Host,
# Connection: close and Content-Length (of the trimmed body) as Test::Nginx
# does, unless --- more_headers sets them.
sub build_request ($$$) {
    my ($name, $request, $more_headers) = @_;

    1 while $request =~ s/^\s*#[^\n]*\n// || $request =~ s/^\s+//;
    my ($line, $body) = split /\n/, $request, 2;
    bail_out("$name - Request line should be non-empty\n")
        unless defined $line && $line =~ /\S/;
    my ($meth, $uri, $ver, $extra) = split ' ', $line;
    bail_out("$name - Request line is not valid. Should be "
             . "'meth [url [version]]' but got \"$line\".\n") if defined $extra;
    $uri //= '/';
    $ver //= 'HTTP/1.1';
    $body //= '';
    utf8::encode($body) if utf8::is_utf8($body);

    my ($headers, $chunked) = format_more_headers($more_headers);
    if (!$chunked && $body ne '' && $more_headers !~ /(?:^|\n)Content-Length:/) {
        $body =~ s/^\s+|\s+$//g;
        $headers .= 'Content-Length: ' . length($body) . "\r\n";
    }

    my $auto = '';
    $auto .= "Host: $ServerName\r\n" if $more_headers !~ /(?:^|\n)Host:/i;
    $auto .= "Connection: close\r\n"
        if $more_headers !~ /(?:^|\n)Connection/i;

    return "$meth $uri $ver\r\n$auto$headers\r\n$body";
}

# A list of requests, each a list of packets (written with one syswrite each).
sub requests_of_block ($) {
    my $block = shift;
    my $name = $block->name;

    if (defined(my $raw = $block->raw_request)) {
        return [ref $raw eq 'ARRAY' ? [@$raw] : [$raw]];
    }
    bail_out("$name - --- pipelined_requests is not supported by this "
             . "runner\n") if defined $block->pipelined_requests;

    my $request = $block->request;
    if (!defined $request && defined $block->request_eval) {
        $request = eval $block->request_eval;
        bail_out("$name - request_eval failed: $@") if $@;
    }
    bail_out("$name - request empty\n") unless defined $request;

    my $more = $block->more_headers // '';
    my @list = ref $request eq 'ARRAY' ? @$request : ($request);
    my @out;
    for my $i (0 .. $#list) {
        bail_out("$name - requests split into packets are not supported by "
                 . "this runner; use --- raw_request eval\n") if ref $list[$i];
        my $hdr = ref $more eq 'ARRAY' ? $more->[$i] : $more;
        bail_out("$name - --- more_headers lacks data for request $i\n")
            unless defined $hdr;
        push @out, [build_request($name, $list[$i], $hdr)];
    }
    return \@out;
}

# Connect, retrying briefly: nginx may still be coming up. Returns undef
# (after one failed assertion) when it never accepts.
sub connect_server ($$) {
    my ($block, $timeout) = @_;
    my $name = $block->name;
    my $addr = $block->server_addr_for_client // $ServerAddr;
    my $deadline = time + 3 * $timeout;
    my $err;

    for (my $try = 1; ; $try++) {
        my $sock = IO::Socket::INET->new(PeerAddr => $addr,
            PeerPort => $ServerPortForClient, Proto => 'tcp',
            Timeout => $timeout);
        return $sock if $sock;
        $err = $!;

        my $pid = get_pid_from_pidfile($name);
        my $dead = !$Test::Nginx::Util::NoNginxManager
                   && !($pid && is_running($pid));
        last if $dead || time >= $deadline;
        sleep min(0.5, 0.015 * $try);
    }

    Test::More::fail("$name - Can't connect to $addr:$ServerPortForClient: "
                     . "$err (aborted)\n"
                     . Test::Nginx::Util::log_tail($ErrLogFile, 10));
    return undef;
}

# Write the packets and read until the server closes the connection.
# Returns (response bytes, 1 if the timeout expired between two I/O events).
sub send_request ($$$) {
    my ($block, $packets, $timeout) = @_;
    my $sock = connect_server($block, $timeout) or return ('', 0);
    local $SIG{PIPE} = 'IGNORE';
    $sock->blocking(0);

    my $sel = IO::Select->new($sock);
    my $middle_delay = parse_time($block->raw_request_middle_delay);
    my @queue = @$packets;
    my $out = shift @queue;
    my ($off, $resp, $writing, $timed_out) = (0, '', 1, 0);

    while (1) {
        my ($readable, $writable) =
            IO::Select->select($sel, $writing ? $sel : undef, undef, $timeout);
        if (!$readable && !$writable) {
            next if $! == EINTR;
            $timed_out = 1;
            last;
        }

        if ($writable && @$writable) {
            my $n = syswrite $sock, $out, length($out) - $off, $off;
            if (!defined $n) {
                next if $! == EAGAIN;
                warn "WARNING: " . $block->name . " - write failed: $!\n";
                $writing = 0;
            } elsif (($off += $n) >= length $out) {
                if (@queue) {
                    sleep $middle_delay if $middle_delay;
                    ($out, $off) = (shift(@queue), 0);
                } else {
                    $writing = 0;
                    shutdown_after_write($block, $sock);
                }
            }
        }

        if ($readable && @$readable) {
            my $n = sysread $sock, my $buf, 65536;
            if (!defined $n) {
                next if $! == EAGAIN;
                warn "WARNING: " . $block->name . " - read failed: $!\n";
                last;
            }
            last if $n == 0;
            $resp .= $buf;
        }
    }
    close $sock;
    return ($resp, $timed_out);
}

sub shutdown_after_write ($$) {
    my ($block, $sock) = @_;
    my $how = $block->shutdown;
    return unless defined $how;
    $how = 1 if $how =~ /^\s*$/;
    shutdown $sock, $how;
}

# --- responses ----------------------------------------------------------------------

# Status, headers and the de-chunked body of a raw HTTP/1.x response.
sub parse_response ($$$) {
    my ($name, $raw, $head_req) = @_;
    my $res = Test::Nginx::Socket::Response->new;

    my $end = index $raw, "\r\n\r\n";
    my $head = $end >= 0 ? substr($raw, 0, $end + 2) : $raw;
    my $rest = $end >= 0 ? substr($raw, $end + 4) : '';
    $res->{raw_headers} = $end >= 0 ? $head : '';

    my @lines = split /\r\n/, $head;
    my $status = shift @lines // '';
    $res->{code} = $1 if $status =~ m{^HTTP/\d+(?:\.\d+)?\s+(\d{3})\b};
    for my $line (@lines) {
        next unless $line =~ /^([^:\s]+)\s*:\s*(.*?)\s*$/;
        push @{ $res->{headers}{lc $1} }, $2;
    }

    my $code = $res->{code} // 0;
    if ($head_req || $code == 304 || $code == 204 || $code == 101
        || ($code >= 100 && $code < 200))
    {
        $res->{content} = '';
        return $res;
    }

    my $te = $res->header('Transfer-Encoding');
    my $len = $res->header('Content-Length');
    if (defined $te && $te eq 'chunked') {
        $res->{content} = decode_chunked($name, $rest);
    } elsif (defined $len && $len =~ /^\d+$/) {
        warn "WARNING: $name - response body truncated: $len expected, but "
             . "got " . length($rest) . "\n" if length $rest < $len;
        $res->{content} = substr $rest, 0, $len;
    } else {
        $res->{content} = $rest;
    }
    return $res;
}

sub decode_chunked ($$) {
    my ($name, $raw) = @_;
    my $body = '';
    while (1) {
        if ($raw !~ /\G[ \t]*([0-9A-Fa-f]+)[^\r\n]*\r\n/gc) {
            Test::More::fail("$name - invalid chunked body received: no "
                             . "chunk size line");
            return $body;
        }
        my $size = hex $1;
        if ($size == 0) {
            # trailers, if any, then the final CRLF; we do not check them
            return $body;
        }
        if (length($raw) - pos($raw) < $size + 2) {
            Test::More::fail("$name - invalid chunked data received (not "
                             . "enough octets for the data section)");
            return $body . substr($raw, pos $raw);
        }
        $body .= substr $raw, pos($raw), $size;
        pos($raw) += $size;
        if ($raw !~ /\G\r\n/gc) {
            Test::More::fail("$name - invalid chunked data received "
                             . "(expected CRLF)");
            return $body;
        }
    }
}

# --- the checks, one assertion each -------------------------------------------------

sub indexed ($$$$) {
    my ($name, $value, $idx, $need_array) = @_;
    if (ref $value eq 'ARRAY') {
        return $value->[$idx];
    }
    bail_out("$name - You asked for many requests, the expected results "
             . "should be arrays as well.\n") if $need_array;
    return $value;
}

sub run_requests ($$) {
    my ($block, $repeat_idx) = @_;
    my $name = $block->name;
    my $timeout = parse_time($block->timeout) // timeout();
    my $requests = requests_of_block($block);
    my $need_array = @$requests > 1;

    for my $idx (0 .. $#$requests) {
        my $packets = $requests->[$idx];
        my $head_req = join('', @$packets) =~ /^\s*HEAD\s/;
        my ($raw, $timed_out) = send_request($block, $packets, $timeout);

        if ($timed_out && !defined $block->abort) {
            Test::More::fail("ERROR: client socket timed out - $name\n");
        }

        if (!defined $block->ignore_response) {
            my $res = parse_response($name, $raw, $head_req);
            check_error_code($block, $res, $idx, $need_array);
            check_raw_headers($block, $res, $idx, $need_array);
            check_headers($block, $res, $idx, $need_array);
            check_body($block, $res, $idx, $repeat_idx, $need_array);
        }

        if ($idx < $#$requests) {
            sleep $block->wait if $block->wait;
            check_error_log($block, $repeat_idx);
            check_access_log($block, $repeat_idx);
        }
    }

    sleep $block->wait if $block->wait;
    check_error_log($block, $repeat_idx);
    check_access_log($block, $repeat_idx);
}

sub check_error_code ($$$$) {
    my ($block, $res, $idx, $need_array) = @_;
    my $name = $block->name;
    my $code = $res->code // '';

    if (defined $block->error_code_like) {
        my $pat = indexed($name, $block->error_code_like, $idx, $need_array);
        Test::More::like($code, qr/$pat/sm, "$name - status code ok");
        return;
    }
    my $want = defined $block->error_code
             ? indexed($name, $block->error_code, $idx, $need_array) : 200;
    Test::More::is($code, $want, "$name - status code ok");
}

sub check_raw_headers ($$$$) {
    my ($block, $res, $idx, $need_array) = @_;
    my $name = $block->name;
    if (defined $block->raw_response_headers_like) {
        my $pat = indexed($name, $block->raw_response_headers_like, $idx,
                          $need_array);
        Test::More::like($res->{raw_headers}, qr/$pat/s,
                         "$name - raw resp headers like");
    }
    if (defined $block->raw_response_headers_unlike) {
        my $pat = indexed($name, $block->raw_response_headers_unlike, $idx,
                          $need_array);
        Test::More::unlike($res->{raw_headers}, qr/$pat/s,
                           "$name - raw resp headers unlike");
    }
}

sub check_headers ($$$$) {
    my ($block, $res, $idx, $need_array) = @_;
    my $name = $block->name;

    if (defined $block->response_headers) {
        my $want = parse_headers(indexed($name, $block->response_headers,
                                         $idx, $need_array));
        for my $key (sort keys %$want) {
            my $val = $want->{$key};
            if (!defined $val) {
                Test::More::unlike($res->{raw_headers}, qr/^\s*\Q$key\E\s*:/ms,
                    "$name - header $key not present in the raw headers");
                next;
            }
            $val =~ s/\$ServerPort\b/$ServerPort/g;
            $val =~ s/\$ServerPortForClient\b/$ServerPortForClient/g;
            Test::More::is($res->header($key) // '', $val,
                           "$name - header $key ok");
        }
    } elsif (defined $block->response_headers_like) {
        my $want = parse_headers(indexed($name, $block->response_headers_like,
                                         $idx, $need_array));
        for my $key (sort keys %$want) {
            my $pat = $want->{$key} // '';
            Test::More::like($res->header($key) // '', qr/^$pat$/,
                             "$name - header $key like ok");
        }
    }
}

sub check_body ($$$$$) {
    my ($block, $res, $idx, $repeat_idx, $need_array) = @_;
    my $name = $block->name;
    my $content = $res->content;

    if (defined $block->response_body || defined $block->response_body_eval) {
        my $want;
        if (defined $block->response_body_eval) {
            $want = eval indexed($name, $block->response_body_eval, $idx,
                                 $need_array);
            warn $@ if $@;
        } else {
            $want = indexed($name, $block->response_body, $idx, $need_array);
        }
        if (defined $want && !ref $want) {
            $want =~ s/\$ServerPort\b/$ServerPort/g;
            $want =~ s/\$ServerPortForClient\b/$ServerPortForClient/g;
        }
        my $what = "(repeated req $repeat_idx, req $idx)";
        if (ref $want) {
            Test::More::like($content, $want,
                             "$name - response_body - like $what");
        } else {
            is_str($content, $want,
                   "$name - response_body - response is expected $what");
        }
    } elsif (defined $block->response_body_like
             || defined $block->response_body_unlike)
    {
        my $like = defined $block->response_body_like;
        my $type = $like ? 'like' : 'unlike';
        my $pat = indexed($name, $like ? $block->response_body_like
                                       : $block->response_body_unlike,
                          $idx, $need_array);
        $pat =~ s/\$ServerPort\b/$ServerPort/g;
        $pat =~ s/\$ServerPortForClient\b/$ServerPortForClient/g;
        my $summary = trim($content) // '';
        $summary = substr($summary, 0, 200) . '...' if length $summary > 200;
        my $desc = "$name - response_body_$type - response is expected "
                   . "($summary)";
        if ($like) {
            Test::More::like($content, qr/$pat/s, $desc);
        } else {
            Test::More::unlike($content, qr/$pat/s, $desc);
        }
    }

    for my $check (@ResponseBodyChecks) {
        $check->($block, $content, $idx, $repeat_idx, 0);
    }
}

# A section's patterns: text is one literal substring per line; eval may
# give a qr// or an array of strings and qr//s.
sub patterns_of ($) {
    my $pats = shift;
    return [$pats] if ref $pats eq 'Regexp';
    return [@$pats] if ref $pats eq 'ARRAY';
    chomp $pats;
    return [split /\n+/, $pats];
}

sub line_matches ($$) {
    my ($line, $pat) = @_;
    return ref $pat ? $line =~ /$pat/ : index($line, $pat) >= 0;
}

sub one_line ($) {
    my $s = shift;
    chomp $s;
    $s =~ s/"/\\"/g;
    $s =~ s/\r/\\r/g;
    $s =~ s/\n/\\n/g;
    return $s;
}

# error_log/access_log: each pattern must match some line.
sub expect_lines ($$$$$) {
    my ($name, $pats, $lines, $file, $repeat_idx) = @_;
    for my $pat (@{ patterns_of($pats) }) {
        my $hit = grep { line_matches($_, $pat) } @$lines;
        my $desc = "$name - pattern \"$pat\" ";
        if ($hit) {
            Test::More::pass($desc . "matches a line in $file "
                             . "(req $repeat_idx)");
        } else {
            Test::More::fail($desc . "should match a line in $file "
                             . "(req $repeat_idx)");
        }
    }
}

# no_error_log/no_access_log: no pattern may match any line.
sub refuse_lines ($$$$$) {
    my ($name, $pats, $lines, $file, $repeat_idx) = @_;
    for my $pat (@{ patterns_of($pats) }) {
        my ($hit) = grep { line_matches($_, $pat) } @$lines;
        my $p = one_line($pat);
        if (defined $hit) {
            Test::More::fail("$name - pattern \"$p\" should not match any "
                . "line in $file but matches line \"" . one_line($hit)
                . "\" (req $repeat_idx)");
        } else {
            Test::More::pass("$name - pattern \"$p\" does not match a line "
                             . "in $file (req $repeat_idx)");
        }
    }
}

sub check_error_log ($$;$) {
    my ($block, $repeat_idx, $quiet) = @_;
    my $name = $block->name;
    my $lines = error_log_data() // [];

    if (defined(my $grep = $block->grep_error_log)) {
        $grep = $grep->[$repeat_idx] if ref $grep eq 'ARRAY';
        my $want = $block->grep_error_log_out;
        bail_out("$name - No --- grep_error_log_out defined but "
                 . "--- grep_error_log is defined\n") unless defined $want;
        $want = $want->[$repeat_idx] if ref $want eq 'ARRAY';
        my $got = '';
        for my $line (@$lines) {
            my $m = ref $grep ? ($line =~ /$grep/ ? $& : undef)
                  : (index($line, $grep) >= 0 ? $grep : undef);
            $got .= "$m\n" if defined $m && $m !~ /\n/;
        }
        is_str($got, $want, "$name - grep_error_log_out (req $repeat_idx)");
    }

    my %expected_level;
    for my $section ($block->error_log, $block->no_error_log) {
        next unless defined $section;
        for my $pat (@{ patterns_of($section) }) {
            next if ref $pat;
            $expected_level{$1} = 1 while $pat =~ /\[(alert|crit|emerg)/g;
        }
    }

    expect_lines($name, $block->error_log, $lines, 'error.log', $repeat_idx)
        if defined $block->error_log;
    refuse_lines($name, $block->no_error_log, $lines, 'error.log',
                 $repeat_idx) if defined $block->no_error_log;

    # like Test::Nginx: serious lines nobody asked about are worth a warning
    for my $line (@$lines) {
        if (!$quiet && $line =~ /\[(alert|crit|emerg)\]/
            && !$expected_level{$1})
        {
            warn "WARNING: $name - " . one_line($line) . "\n";
        }
        if ($line =~ /\bAssertion .*?failed\b/) {
            Test::More::fail("$name - " . one_line($line));
        }
    }
}

sub check_access_log ($$) {
    my ($block, $repeat_idx) = @_;
    return if defined $block->ignore_response;
    return unless defined $block->access_log || defined $block->no_access_log;
    my $name = $block->name;
    my $lines = access_log_data();
    expect_lines($name, $block->access_log, $lines, 'access.log', $repeat_idx)
        if defined $block->access_log;
    refuse_lines($name, $block->no_access_log, $lines, 'access.log',
                 $repeat_idx) if defined $block->no_access_log;
}


# A parsed response: just what the checks need (code, header, content).
package Test::Nginx::Socket::Response;

sub new { return bless { headers => {}, content => '', raw_headers => '' },
          shift }

sub code { return $_[0]{code} }

sub content {
    my $self = shift;
    $self->{content} = shift if @_;
    return $self->{content};
}

# all values of a header joined by ", ", as HTTP::Headers does
sub header {
    my ($self, $key) = @_;
    my $vals = $self->{headers}{lc $key} or return undef;
    return join ', ', @$vals;
}

1;

__END__

=head1 NAME

Test::Nginx::Socket - ngx_llm's small work-alike of CPAN's Test::Nginx::Socket

=head1 SYNOPSIS

    use Test::Nginx::Socket 'no_plan';   # or: plan tests => N;
    no_shuffle();
    run_tests();

    __DATA__

    === TEST 1: hello
    --- config
        location = /t { return 200 "hello"; }
    --- request
    GET /t
    --- response_body chomp
    hello

Run with C<prove -I t/lib t/000-runner-selftest.t>. When the real
Test::Nginx is installed, leave out C<-I t/lib> and it is used instead.

=head1 SUPPORTED

Functions: run_tests, plan, blocks, repeat_each, no_shuffle, timeout,
env_to_nginx, workers, worker_connections, master_on, master_off,
master_process_enabled, log_level, no_root_location, config_preamble,
server_name, server_addr, server_port, server_port_for_client, html_dir,
server_root, use_hup, no_nginx_manager, check_accum_error_log,
no_long_string, add_block_preprocessor, add_cleanup_handler,
add_response_body_check, bail_out, is_str.

Sections: config, http_config, main_config, post_main_config,
server_name, log_level, user_files, init, request (also C<eval>, and an
array of requests), request_eval, more_headers, raw_request (string or
array of packets), raw_request_middle_delay, timeout (s or ms), abort,
shutdown, wait, ignore_response, error_code, error_code_like,
response_headers (C<!Name> = absent), response_headers_like,
raw_response_headers_like/unlike, response_body, response_body_eval,
response_body_like/unlike (C</s>), error_log, no_error_log,
grep_error_log, grep_error_log_out, access_log, no_access_log, must_die,
skip_eval, skip_nginx, ONLY, SKIP, LAST, server_addr_for_client.

Environment: TEST_NGINX_BINARY, TEST_NGINX_SERVER_PORT, TEST_NGINX_PORT,
TEST_NGINX_CLIENT_PORT, TEST_NGINX_SERVROOT, TEST_NGINX_LOAD_MODULES,
TEST_NGINX_MASTER_PROCESS, TEST_NGINX_LOG_LEVEL, TEST_NGINX_TIMEOUT,
TEST_NGINX_NO_SHUFFLE, TEST_NGINX_FORCE_RESTART_ON_TEST (default 1, as
in Test::Nginx: restart before every block; 0: only when the generated
nginx.conf changed), TEST_NGINX_USE_HUP, TEST_NGINX_NO_CLEAN,
TEST_NGINX_NO_NGINX_MANAGER, TEST_NGINX_SLEEP, TEST_NGINX_WORKER_USER,
TEST_NGINX_ERROR_LOG, TEST_NGINX_VERBOSE, and C<$TEST_NGINX_*> expansion
(including C<$TEST_NGINX_RAND_PORT_N>) in config sections and user_files.

The error log is read as Test::Nginx reads it. error_log, no_error_log
and grep_error_log are checked after each request of a block and once
more at its end, and each check reads on from where the one before
stopped: with several requests, the checks after the first request see
the log from its start and the last check sees only the lines written
after the last request. A block starts reading at the start of the file,
so when nginx is kept the lines of earlier blocks are seen too. With
check_accum_error_log every check reads the whole file.

=head1 DIFFERENCES

Not supported (a clear bail-out, never a silent pass): pipelined_requests,
requests split into packets inside C<--- request> (use raw_request),
HTTP/2 and HTTP/3, stap, valgrind, check-leak and benchmark modes.
With TEST_NGINX_FORCE_RESTART_ON_TEST=0, nginx is restarted when the whole
generated nginx.conf changed (Test::Nginx compares only C<--- config>).
A daemonized nginx
that exited is treated as gone even while it is an unreaped zombie. nginx is started
with C<-e logs/error.log> so that must_die blocks can check the messages
nginx prints before it reads its error_log directive.

=cut
