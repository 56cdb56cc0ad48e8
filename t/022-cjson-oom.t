# Error replies when cJSON runs out of memory: the same error object, with
# its status, type, param and code, written without cJSON.
# cJSON out of memory, where it is asked for the "error" object only: a
# library in front of libcjson in nginx (the engine's environment is
# stripped, so the engine runs without it). Set before Test::Nginx loads:
# the real runner keeps the LD_PRELOAD it found then for every nginx it
# starts.
BEGIN {
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
}

use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: cJSON out of memory: the error reply is the same, written by hand
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
--- error_log
[alert]
llm: cJSON could not build the error reply, written without it



=== TEST 2: cJSON out of memory: the message escaped as cJSON escapes it
--- http_config
    llm_engine main { model $TEST_NGINX_MODEL; }
--- config
    location /v1/ { llm_api main; }
--- request
POST /v1/completions
{"model":"no\"such","prompt":"x"}
--- error_code: 404
--- response_body_like: ^\{"error":\{"message":"The model `no\\"such` does not exist","type":"invalid_request_error","param":null,"code":"model_not_found"\}\}$
--- error_log
[alert]
llm: cJSON could not build the error reply, written without it
