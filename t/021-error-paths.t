# The module's paths when things go wrong, and its trace: a stream cut by
# an error logs the status it stands for, an error reply survives cJSON
# running out of memory, and a debug log shows a ring slot's life.
use Test::Nginx::Socket 'no_plan';

# cJSON out of memory, where it is asked for the "error" object only: a
# library in front of libcjson in nginx (the engine's environment is
# stripped, so the engine runs without it)
my $dir = "$ENV{TEST_NGINX_BUILD}/t";
my $shim = "$dir/cjson_no_error.so";
if (!-f $shim) {
    system("mkdir -p $dir") == 0 or die;
    open my $fh, '>', "$dir/cjson_no_error.c" or die;
    print $fh <<'C';
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

typedef struct cJSON cJSON;

cJSON *
cJSON_AddObjectToObject(cJSON *object, const char *name)
{
    cJSON *(*real)(cJSON *, const char *);

    if (name != NULL && strcmp(name, "error") == 0) {
        return NULL;
    }
    real = (cJSON *(*)(cJSON *, const char *))
           dlsym(RTLD_NEXT, "cJSON_AddObjectToObject");
    return real ? real(object, name) : NULL;
}
C
    close $fh;
    system("cc -shared -fPIC -O -o $shim $dir/cjson_no_error.c -ldl") == 0
        or die "cannot build $shim";
}
$ENV{LD_PRELOAD} = $shim;

$ENV{TEST_NGINX_DEBUG} = (`$ENV{TEST_NGINX_BINARY} -V 2>&1` =~ /--with-debug/)
                         ? 1 : 0;

no_shuffle();
run_tests();

__DATA__

=== TEST 1: a stream cut by its deadline logs the 504 it stands for
--- http_config
    llm_engine main { model $TEST_NGINX_MODEL; served_model_name smollm2; }
--- config
    location /v1/ {
        llm_api main;
        llm_deadline 3s;
    }
--- request
POST /v1/completions
{"model":"smollm2","prompt":"Once upon a time","max_tokens":4000,"ignore_eos":true,"stream":true}
--- timeout: 60
--- error_code: 200
--- response_body_like: \ndata: \{"error":\{"message":"the generation deadline passed","type":"server_error","param":null,"code":"deadline_exceeded"\}\}\n\ndata: \[DONE\]\n\n$
--- error_log
llm: 504 stream ended by an error: the generation deadline passed



=== TEST 2: cJSON out of memory: the error reply is the same, written by hand
--- http_config
    llm_engine main { model $TEST_NGINX_MODEL; }
--- config
    location /v1/ { llm_api main; }
--- request
GET /v1/nothing
--- error_code: 404
--- response_headers
Content-Type: application/json
--- response_body_like: ^\{"error":\{"message":"unknown endpoint /v1/nothing","type":"invalid_request_error","param":null,"code":"unknown_url"\}\}$
--- error_log eval
qr/\[alert\] .*llm: cJSON could not build the error reply, written without it/



=== TEST 3: cJSON out of memory: the message escaped as cJSON escapes it
--- http_config
    llm_engine main { model $TEST_NGINX_MODEL; }
--- config
    location /v1/ { llm_api main; }
--- request
POST /v1/completions
{"model":"no\"such","prompt":"x"}
--- error_code: 404
--- response_body_like: ^\{"error":\{"message":"The model `no\\"such` does not exist","type":"invalid_request_error","param":null,"code":"model_not_found"\}\}$
--- error_log eval
qr/\[alert\] .*llm: cJSON could not build the error reply, written without it/



=== TEST 4: a debug log shows a ring slot's life
--- skip_eval: 7: !$ENV{TEST_NGINX_DEBUG}
--- log_level: debug
--- http_config
    llm_engine main { model $TEST_NGINX_MODEL; served_model_name smollm2; }
--- config
    location /v1/ { llm_api main; }
--- request
POST /v1/completions
{"model":"smollm2","prompt":"Once upon a time","max_tokens":3,"ignore_eos":true}
--- timeout: 60
--- error_code: 200
--- error_log eval
[qr/llm: admitted: 4 prompt tokens, up to 3 more, stream:0/,
 qr/llm: ring slot \d+ taken, kind 2, request \d+/,
 qr/llm: ring slot \d+ submitted as cmpl-[0-9a-f]+/,
 qr/llm: ring slot \d+: first token after \d+ us/,
 qr/llm: ring slot \d+ finished: length, 3 tokens, 0 cached/,
 qr/llm: ring slot \d+ freed/]
--- no_error_log
[error]



=== TEST 5: a stop string ends the generation here: the engine is told to cancel
--- skip_eval: 4: !$ENV{TEST_NGINX_DEBUG}
--- log_level: debug
--- http_config
    llm_engine main { model $TEST_NGINX_MODEL; served_model_name smollm2; }
--- config
    location /v1/ { llm_api main; }
--- request
POST /v1/completions
{"model":"smollm2","prompt":"Once upon a time","max_tokens":200,"ignore_eos":true,"stop":[" "]}
--- timeout: 60
--- error_code: 200
--- error_log eval
[qr/llm: ring slot \d+ finished: stop, \d+ tokens/,
 qr/llm: ring slot \d+ cancelled, the engine frees it/]
--- no_error_log
[error]
