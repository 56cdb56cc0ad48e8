# Strict input through nginx: a body that is not RFC 8259 JSON, a float
# that underflows, raw bytes in the URI and a long message cut inside a
# character, malformed and stalled chunked bodies. Every answer from an
# llm_api location is an OpenAI error object in valid UTF-8, nginx's own
# 400 and 408 included.
use Test::Nginx::Socket 'no_plan';
use Encode ();
use JSON::PP ();

# --- strict_json: REGEX: the body is strict UTF-8, parses as JSON, is an
# OpenAI error object, and its message matches REGEX (on the decoded text)
add_response_body_check(sub {
    my ($block, $body, $req_idx, $repeated_req_idx, $dry_run) = @_;
    my $want = $block->strict_json or return;
    my $name = $block->name;
    chomp $want;
    my $text = eval {
        Encode::decode('UTF-8', $body // '', Encode::FB_CROAK);
    };
    ok(defined $text, "$name - body is valid UTF-8")
        or diag("body: " . ($body // '(none)'));
    my $json = defined $text ? eval { JSON::PP->new->decode($text) } : undef;
    ok(ref $json eq 'HASH' && ref $json->{error} eq 'HASH'
       && exists $json->{error}{type} && exists $json->{error}{code},
       "$name - body is an OpenAI error object")
        or diag("body: " . ($body // '(none)'));
    like($json ? $json->{error}{message} : '', qr/$want/,
         "$name - message");
});

add_block_preprocessor(sub {
    my $block = shift;

    $block->set_value("http_config", <<'_EOC_')
    llm_engine tiny {
        model $TEST_NGINX_FIXTURES/models/tiny260K-f32.gguf;
        served_model_name tiny;
    }
_EOC_
        unless defined $block->http_config;

    $block->set_value("config", <<'_EOC_')
    location /v1/ { llm_api tiny; }
_EOC_
        unless defined $block->config;

    $block->set_value("timeout", 20) unless defined $block->timeout;
});

sub req ($$) {
    my ($head, $body) = @_;
    return "$head\r\nHost: localhost\r\nConnection: close\r\n"
           . "Content-Type: application/json\r\n"
           . "Content-Length: " . length($body) . "\r\n\r\n$body";
}

sub chunked ($) {
    return "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\n"
           . "Connection: close\r\nContent-Type: application/json\r\n"
           . "Transfer-Encoding: chunked\r\n\r\n$_[0]";
}

our $Good = '{"model":"tiny","prompt":"hi","max_tokens":1}';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: a raw NUL before the object is a 400 invalid_json, not whitespace
--- raw_request eval
main::req("POST /v1/completions HTTP/1.1",
          "\0" . '{"model":"tiny","prompt":"hi","max_tokens":1}')
--- error_code: 400
--- response_headers
Content-Type: application/json
--- response_body_like: ^\{"error":\{"message":"We could not parse the JSON body of your request: control character 0x00 at byte 0 \(JSON allows only space, tab, CR and LF between tokens\)\. The API expects a JSON object\.","type":"invalid_request_error","param":null,"code":"invalid_json"\}\}$
--- error_log
llm: 400 We could not parse the JSON body
--- no_error_log
[error]



=== TEST 2: a leading zero and a trailing dot are not JSON numbers
--- request eval
['POST /v1/completions
{"model":"tiny","prompt":"hi","max_tokens":02}',
'POST /v1/completions
{"model":"tiny","prompt":"hi","max_tokens":2.e1}']
--- error_code eval
[400, 400]
--- response_body_like eval
['"message":"We could not parse the JSON body of your request: invalid number at byte 43 .*"code":"invalid_json"',
 '"message":"We could not parse the JSON body of your request: invalid number at byte 43 .*"code":"invalid_json"']
--- no_error_log
[error]



=== TEST 3: top_p 1e-300 is in range as a number but 0 as a float: a range error naming top_p
--- request
POST /v1/completions
{"model":"tiny","prompt":"hi","max_tokens":1,"top_p":1e-300}
--- error_code: 400
--- response_body_like: ^\{"error":\{"message":"Invalid 'top_p': decimal below minimum value\. Expected a value >= 1\.40129846432482e-45, but got 1e-300 instead\.","type":"invalid_request_error","param":"top_p","code":"decimal_below_min_value"\}\}$
--- no_error_log
[error]



=== TEST 4: raw bytes in the URI of a 404: the body is valid UTF-8 and JSON
--- raw_request eval
main::req("POST /v1/\xff\xfe HTTP/1.1", $main::Good)
--- error_code: 404
--- strict_json
^unknown endpoint /v1/\x{fffd}\x{fffd}$
--- no_error_log
[error]



=== TEST 5: raw bytes in the URI of a 405 the same
--- raw_request eval
"GET /v1/\xc3/completions HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
--- error_code: 405
--- strict_json
^use POST for /v1/\x{fffd}/completions$
--- no_error_log
[error]



=== TEST 6: a message cut at 511 bytes is cut between characters
The URI decodes to "/v1/x" and 300 two-byte characters: "unknown endpoint "
and 489 bytes of them fill the buffer, the last character would be split.
--- raw_request eval
main::req("POST /v1/x" . ("%C3%A9" x 300) . " HTTP/1.1", $main::Good)
--- error_code: 404
--- strict_json
^unknown endpoint /v1/x\x{e9}{244}$
--- no_error_log
[error]



=== TEST 7: a malformed chunk size in the first read is nginx's 400, sent as JSON
--- raw_request eval
main::chunked("zz\r\n$main::Good\r\n0\r\n\r\n")
--- error_code: 400
--- response_headers
Content-Type: application/json
--- strict_json
^The HTTP request could not be read: it is malformed
--- error_log
client sent invalid chunked body
llm: 400 from nginx, sent as an OpenAI error object
--- no_error_log
[alert]
[crit]



=== TEST 8: chunk size -1
--- raw_request eval
main::chunked("-1\r\n$main::Good\r\n0\r\n\r\n")
--- error_code: 400
--- strict_json
^The HTTP request could not be read
--- no_error_log
[alert]
[crit]



=== TEST 9: a chunk size of 21 hex digits
--- raw_request eval
main::chunked("100000000000000000000\r\n$main::Good\r\n0\r\n\r\n")
--- error_code: 400
--- strict_json
^The HTTP request could not be read
--- no_error_log
[alert]
[crit]



=== TEST 10: chunk data longer than its size
--- raw_request eval
main::chunked("3\r\n$main::Good\r\n0\r\n\r\n")
--- error_code: 400
--- strict_json
^The HTTP request could not be read
--- no_error_log
[alert]
[crit]



=== TEST 11: chunk data without its CRLF
--- raw_request eval
main::chunked(sprintf("%x\r\n%s0\r\n\r\n", length $main::Good, $main::Good))
--- error_code: 400
--- strict_json
^The HTTP request could not be read
--- no_error_log
[alert]
[crit]



=== TEST 12: a bad chunk in a later packet: nginx finalizes the request itself, still JSON
--- raw_request eval
[main::chunked(""), "zz\r\n$main::Good\r\n0\r\n\r\n"]
--- raw_request_middle_delay: 0.5
--- error_code: 400
--- response_headers
Content-Type: application/json
--- strict_json
^The HTTP request could not be read: it is malformed
--- error_log
client sent invalid chunked body
llm: 400 from nginx, sent as an OpenAI error object
--- no_error_log
[alert]
[crit]



=== TEST 13: a good chunked body split over two packets still works
--- raw_request eval
[main::chunked(sprintf("%x\r\n%s", length $main::Good, substr($main::Good, 0, 10))),
 substr($main::Good, 10) . "\r\n0\r\n\r\n"]
--- raw_request_middle_delay: 0.3
--- error_code: 200
--- response_body_like: "object":"text_completion"
--- no_error_log
[error]



=== TEST 14: a stalled body: client_body_timeout is a 408 in JSON, not a closed connection
--- config
    location /v1/ {
        llm_api tiny;
        client_body_timeout 1s;
    }
--- raw_request eval
"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"model\":"
--- error_code: 408
--- response_headers
Content-Type: application/json
--- strict_json
^The request body did not arrive in time\.$
--- error_log
llm: 408 The request body did not arrive in time.
--- no_error_log
[error]



=== TEST 15: a stalled chunked body the same
--- config
    location /v1/ {
        llm_api tiny;
        client_body_timeout 1s;
    }
--- raw_request eval
main::chunked("5\r\n{\"mod")
--- error_code: 408
--- strict_json
^The request body did not arrive in time\.$
--- no_error_log
[error]



=== TEST 16: the location's own error_page still wins over the JSON page
--- config
    location /v1/ {
        llm_api tiny;
        error_page 400 /bad;
    }
    location = /bad { return 200 "own page\n"; }
--- raw_request eval
main::chunked("zz\r\n$main::Good\r\n0\r\n\r\n")
--- error_code: 400
--- response_body
own page



=== TEST 17: a chunked body over llm_max_body_size is refused while it is read, as JSON
core's client_max_body_size is the location's llm_max_body_size: two chunks
of 768 bytes pass 1k without a Content-Length to check first.
--- config
    location /v1/ { llm_api tiny; llm_max_body_size 1k; }
--- raw_request eval
main::chunked("300\r\n" . ("x" x 768) . "\r\n300\r\n" . ("x" x 768)
              . "\r\n0\r\n\r\n")
--- error_code: 413
--- response_headers
Content-Type: application/json
--- strict_json
^request body is over the limit of 1024 bytes$
--- error_log
client intended to send too large chunked body
--- no_error_log
[alert]
[crit]



=== TEST 18: a declared body over llm_max_body_size: the message names both sizes
--- config
    location /v1/ { llm_api tiny; llm_max_body_size 1k; }
--- raw_request eval
main::req("POST /v1/completions HTTP/1.1", "x" x 2000)
--- error_code: 413
--- strict_json
^request body of 2000 bytes is over the limit of 1024 bytes$
--- no_error_log
[alert]
[crit]



=== TEST 19: nginx's 429 (limit_req) is a rate_limit_error, by the one rule of the error type
--- http_config
    llm_engine tiny {
        model $TEST_NGINX_FIXTURES/models/tiny260K-f32.gguf;
        served_model_name tiny;
    }
    limit_req_zone $server_name zone=one:1m rate=1r/m;
--- config
    location /v1/ {
        llm_api tiny;
        limit_req zone=one;
        limit_req_status 429;
    }
--- request eval
["GET /v1/nowhere", "GET /v1/nowhere"]
--- error_code eval
[404, 429]
--- response_body_like eval
[qr/^\{"error":\{"message":"unknown endpoint \/v1\/nowhere","type":"invalid_request_error","param":null,"code":"unknown_url"\}\}$/,
 qr/^\{"error":\{"message":"The request failed with HTTP status 429\.","type":"rate_limit_error","param":null,"code":null\}\}$/]
--- no_error_log
[alert]
[crit]
