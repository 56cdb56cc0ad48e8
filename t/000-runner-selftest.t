# The Test::Nginx runner against stock nginx (no LLM module): requests,
# response parsing, checks, error-log isolation and when nginx restarts.
# Runs under our t/lib work-alike and under CPAN's Test::Nginx:
#   prove -I t/lib t/000-runner-selftest.t

use Test::Nginx::Socket;

# Blocks say whether nginx must be kept (same pid as the block before) or
# restarted; by default this file keeps nginx while the config is the same.
# --- accum_error_log turns check_accum_error_log on for one block.
my $last_pid;

add_block_preprocessor(sub {
    my $block = shift;
    $Test::Nginx::Util::ForceRestartOnTest = defined $block->force_restart;
    $Test::Nginx::Util::CheckAccumErrLog = defined $block->accum_error_log;
});

add_response_body_check(sub {
    my ($block, $body, $req_idx, $repeated_req_idx, $dry_run) = @_;
    my $want = $block->nginx_pid or return;
    my $name = $block->name;
    my ($pid) = ($body // '') =~ /pid=(\d+)/;
    if ($want eq 'first') {
        ok(defined $pid, "$name - nginx pid seen");
    } elsif ($want eq 'same') {
        is($pid, $last_pid, "$name - nginx kept (same pid)");
    } else {
        ok(defined $pid && defined $last_pid && $pid ne $last_pid,
           "$name - nginx restarted (new pid)");
    }
    $last_pid = $pid;
});

$ENV{TEST_NGINX_SELFTEST_WORD} = 'expanded';

no_shuffle();
plan tests => 57;
run_tests();

__DATA__

=== TEST 1: return 200 with a plain body
--- config
    location = /hello { return 200 "hello"; }
--- request
GET /hello
--- response_body chomp
hello
--- response_headers
Content-Type: text/plain
Content-Length: 5
--- no_error_log
[error]



=== TEST 2: request headers reach nginx; absent and matching headers
--- config
    location = /echo { return 200 "x-foo=$http_x_foo\n"; }
--- more_headers
X-Foo: bar baz
# a comment line is not a header
--- request
GET /echo
--- response_body
x-foo=bar baz
--- response_headers
!X-Not-There
--- response_headers_like
Server: nginx/\d+\.\d+\.\d+



=== TEST 3: 404 from the default root location
--- config
    location = /hello { return 200 "hello"; }
--- request
GET /no-such-file.html
--- error_code: 404
--- response_body_like: <title>404 Not Found</title>.*</html>
--- error_log
open() "
no-such-file.html" failed (2: No such file or directory)



=== TEST 4: error_log check on a known failure (root /nonexistent)
--- config
    location /files/ { root /nonexistent; }
    location = /ok { return 200 "ok\n"; }
--- request
GET /files/missing.txt
--- error_code: 404
--- error_log eval
qr{open\(\) "/nonexistent/files/missing\.txt" failed \(2: No such file}



=== TEST 5: nginx kept: a block reads the error log from its start, so the previous block's line is seen
--- config
    location /files/ { root /nonexistent; }
    location = /ok { return 200 "ok\n"; }
--- request
GET /ok
--- response_body
ok
--- error_log
open() "/nonexistent/files/missing.txt" failed



=== TEST 5b: each error log check reads on from the one before: one line per request, not two at the end
--- force_restart
--- config
    location /files/ { root /nonexistent; }
    location = /ok { return 200 "ok\n"; }
--- request eval
["GET /files/missing.txt", "GET /files/missing.txt"]
--- error_code eval
[404, 404]
--- grep_error_log eval
qr/open\(\) "[^"]+" failed/
--- grep_error_log_out
open() "/nonexistent/files/missing.txt" failed



=== TEST 5c: check_accum_error_log: the check after the last request still sees the first request's line
--- force_restart
--- accum_error_log
--- config
    location /files/ { root /nonexistent; }
    location = /ok { return 200 "ok\n"; }
--- request eval
["GET /files/missing.txt", "GET /ok"]
--- error_code eval
[404, 200]
--- error_log
open() "/nonexistent/files/missing.txt" failed



=== TEST 6: chunked response (ssi on a user file) is de-chunked
--- config
    location = /ssi.txt {
        root $TEST_NGINX_SERVER_ROOT/html;
        ssi on;
        ssi_types text/plain;
    }
--- user_files
>>> ssi.txt
a<!--# echo var="arg_x" -->b
--- request
GET /ssi.txt?x=42
--- response_headers
Transfer-Encoding: chunked
!Content-Length
--- response_body
a42b



=== TEST 7: body gets a Content-Length (trimmed) and $TEST_NGINX_ vars expand
--- http_config
    map $request_method $word { default "$TEST_NGINX_SELFTEST_WORD"; }
--- config
    location = /len {
        proxy_pass http://127.0.0.1:$TEST_NGINX_SERVER_PORT/back;
    }
    location = /back { return 200 "len=$content_length word=$word\n"; }
--- request
POST /len
  hello world  
--- response_body
len=11 word=expanded



=== TEST 8: request eval and error_code_like
--- config
    location = /len {
        proxy_pass http://127.0.0.1:$TEST_NGINX_SERVER_PORT/back;
    }
    location = /back { return 201 "len=$content_length\n"; }
--- request eval
"POST /len\n" . ("x" x 1000)
--- error_code_like: ^20[01]$
--- response_body
len=1000



=== TEST 9: raw_request, HTTP/1.0, HEAD has no body
--- config
    location = /hello { return 200 "hello"; }
--- raw_request eval
"HEAD /hello HTTP/1.0\r\nHost: localhost\r\n\r\n"
--- response_headers
Content-Length: 5
--- response_body chomp



=== TEST 10: several requests in one block
--- config
    location = /a { return 200 "A\n"; }
    location = /b { return 403; }
--- request eval
["GET /a", "GET /b"]
--- error_code eval
[200, 403]
--- response_body_like eval
["^A\$", "403 Forbidden"]



=== TEST 11: first block of a config records nginx's pid
--- force_restart
--- config
    location = /pid { return 200 "pid=$pid\n"; }
--- request
GET /pid
--- nginx_pid: first
--- response_body_like: ^pid=\d+$



=== TEST 12: identical config: nginx is not restarted
--- config
    location = /pid { return 200 "pid=$pid\n"; }
--- request
GET /pid
--- nginx_pid: same
--- response_body_like: ^pid=\d+$



=== TEST 13: a block without config reuses the running nginx
--- request
GET /pid
--- nginx_pid: same
--- response_body_like: ^pid=\d+$



=== TEST 14: changed config: nginx is restarted
--- config
    location = /pid { return 200 "pid=$pid changed\n"; }
--- request
GET /pid
--- nginx_pid: new
--- response_body_like: ^pid=\d+ changed$



=== TEST 15: changed http_config alone also restarts nginx
--- skip_eval: 3: !$Test::Nginx::Socket::NgxLlmWorkAlike
--- http_config
    map $uri $unused_by_test { default 1; }
--- config
    location = /pid { return 200 "pid=$pid changed\n"; }
--- request
GET /pid
--- nginx_pid: new
--- response_body_like: ^pid=\d+ changed$



=== TEST 16: must_die: a bad directive stops nginx with its message logged
--- skip_eval: 2: !$Test::Nginx::Socket::NgxLlmWorkAlike
--- config
    location = /t { no_such_directive on; }
--- request
GET /t
--- must_die
--- error_log
unknown directive "no_such_directive"
