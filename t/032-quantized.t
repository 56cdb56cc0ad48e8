# Files our own quantizer makes from the default model (llama.cpp's mixes,
# requantized from Q4_1) load and serve through nginx: Q4_K_M (Q5_0, Q8_0,
# Q4_K, Q6_K tensors: SmolLM2's rows of 576 fall back from Q4_K), Q2_K
# (Q4_0, Q3_K), Q5_K_M (Q5_1, Q5_K, Q6_K) and IQ4_XS; the greedy text
# through nginx is the offline engine's for the same file.
use Test::Nginx::Socket 'no_plan';

my $dir = "$ENV{TEST_NGINX_BUILD}/t";
system("mkdir -p $dir") == 0 or die;
for my $type (qw(Q4_K_M Q2_K Q5_K_M IQ4_XS)) {
    my $out = "$dir/smollm2-$type.gguf";
    system("$ENV{TEST_NGINX_ENGINE} quantize $ENV{TEST_NGINX_MODEL} $out "
           . "$type > $dir/quantize-$type.log") == 0
        or die "quantize $type failed";
    $ENV{"TEST_NGINX_MODEL_$type"} = $out;

    # the offline engine's greedy continuation, as a JSON string's body
    my $text = `$ENV{TEST_NGINX_ENGINE} generate --model $out --prompt 'The capital of France is' --max-tokens 8 --temperature 0 --no-echo --threads 1 2>/dev/null`;
    die "generate $type failed" if $? != 0 || $text eq '';
    chomp $text;                        # generate ends its output with one
    $text =~ s/\\/\\\\/g;
    $text =~ s/"/\\"/g;
    $text =~ s/\n/\\n/g;
    $ENV{"TEST_NGINX_TEXT_$type"} = quotemeta($text);
}

check_accum_error_log();
no_shuffle();
run_tests();

__DATA__

=== TEST 1: Q4_K_M (our quantizer): the model loads, its tensor types are logged, greedy text as offline
--- http_config
    llm_engine q {
        model $TEST_NGINX_MODEL_Q4_K_M;
        served_model_name smollm2;
        max_model_len 512;
        kv_cache_memory 16m;
    }
--- config
    location /v1/ { llm_api q; }
--- request eval
["GET /v1/models", "POST /v1/completions\n{\"model\":\"smollm2\",\"prompt\":\"The capital of France is\",\"max_tokens\":8,\"temperature\":0}"]
--- timeout: 120
--- error_code eval
[200, 200]
--- response_body_like eval
['"id":"smollm2".*"architecture":"llama"', '"text":"' . $ENV{TEST_NGINX_TEXT_Q4_K_M} . '"']
--- no_error_log
[error]



=== TEST 2: Q2_K (Q4_0 and Q3_K tensors): greedy text as offline
--- http_config
    llm_engine q {
        model $TEST_NGINX_MODEL_Q2_K;
        served_model_name smollm2;
        max_model_len 512;
        kv_cache_memory 16m;
    }
--- config
    location /v1/ { llm_api q; }
--- request
POST /v1/completions
{"model":"smollm2","prompt":"The capital of France is","max_tokens":8,"temperature":0}
--- timeout: 120
--- error_code: 200
--- response_body_like eval
'"text":"' . $ENV{TEST_NGINX_TEXT_Q2_K} . '"'
--- no_error_log
[error]



=== TEST 3: Q5_K_M (Q5_1, Q5_K, Q6_K tensors): greedy text as offline
--- http_config
    llm_engine q {
        model $TEST_NGINX_MODEL_Q5_K_M;
        served_model_name smollm2;
        max_model_len 512;
        kv_cache_memory 16m;
    }
--- config
    location /v1/ { llm_api q; }
--- request
POST /v1/completions
{"model":"smollm2","prompt":"The capital of France is","max_tokens":8,"temperature":0}
--- timeout: 120
--- error_code: 200
--- response_body_like eval
'"text":"' . $ENV{TEST_NGINX_TEXT_Q5_K_M} . '"'
--- no_error_log
[error]



=== TEST 4: IQ4_XS (IQ4_NL, IQ4_XS, Q5_K tensors): greedy text as offline
--- http_config
    llm_engine q {
        model $TEST_NGINX_MODEL_IQ4_XS;
        served_model_name smollm2;
        max_model_len 512;
        kv_cache_memory 16m;
    }
--- config
    location /v1/ { llm_api q; }
--- request
POST /v1/completions
{"model":"smollm2","prompt":"The capital of France is","max_tokens":8,"temperature":0}
--- timeout: 120
--- error_code: 200
--- response_body_like eval
'"text":"' . $ENV{TEST_NGINX_TEXT_IQ4_XS} . '"'
--- no_error_log
[error]
