/*
 * /v1/embeddings bodies and replies (api/embeddings.c): every input shape
 * OpenAI documents, the options, each refusal with OpenAI's status,
 * code and param; the reply's shape, floats that read back as the same
 * floats, base64 of little-endian float32 (what the openai SDK decodes
 * with numpy.frombuffer(..., "float32")).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tap.h"
#include "api/embeddings.h"


static int
parse(const char *body, llm_embed_request *req, llm_api_error *err)
{
    llm_api_limits  lim;

    llm_api_limits_default(&lim);
    lim.vocab_size = 1000;
    memset(err, 0, sizeof(*err));
    return llm_embed_parse(req, body, strlen(body), &lim, err);
}


/* body refused with status, code and param */
static void
refused(const char *body, int status, const char *code, const char *param,
    const char *what)
{
    llm_embed_request  req;
    llm_api_error      err;
    int                rc = parse(body, &req, &err);

    ok(rc == -1 && err.status == status && strcmp(err.code, code) == 0
       && strcmp(err.param, param) == 0,
       "%s: %d %s %s (%s)", what, err.status, err.code, err.param,
       err.message);
    llm_embed_request_free(&req);
}


static int
b64_value(char c)
{
    const char *tab = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                      "0123456789+/";
    const char *p = strchr(tab, c);

    return c != '\0' && p != NULL ? (int) (p - tab) : -1;
}


/* a reference decoder, written from RFC 4648 apart from the encoder */
static size_t
b64_decode(const char *s, unsigned char *out)
{
    size_t  n = 0, i, len = strlen(s);
    int     a, b, c, d;

    for (i = 0; i + 3 < len; i += 4) {
        a = b64_value(s[i]);
        b = b64_value(s[i + 1]);
        c = s[i + 2] == '=' ? 0 : b64_value(s[i + 2]);
        d = s[i + 3] == '=' ? 0 : b64_value(s[i + 3]);
        out[n++] = (unsigned char) (a << 2 | b >> 4);
        if (s[i + 2] != '=') {
            out[n++] = (unsigned char) ((b & 15) << 4 | c >> 2);
        }
        if (s[i + 3] != '=') {
            out[n++] = (unsigned char) ((c & 3) << 6 | d);
        }
    }
    return n;
}


static void
test_parse(void)
{
    llm_embed_request  req;
    llm_api_error      err;

    ok(parse("{\"model\":\"m\",\"input\":\"hello\"}", &req, &err) == 0
       && req.n_inputs == 1 && strcmp(req.text[0], "hello") == 0
       && req.text_len[0] == 5 && req.ids[0] == NULL && !req.base64
       && req.dimensions == 0 && strcmp(req.model, "m") == 0,
       "a string: one text input, float, no dimensions");
    llm_embed_request_free(&req);

    ok(parse("{\"model\":\"m\",\"input\":[\"a\",\"b c\",\"d\"],"
             "\"encoding_format\":\"base64\",\"dimensions\":32,"
             "\"user\":\"u1\"}", &req, &err) == 0
       && req.n_inputs == 3 && strcmp(req.text[1], "b c") == 0
       && req.base64 && req.dimensions == 32,
       "an array of strings, base64, dimensions, user");
    llm_embed_request_free(&req);

    ok(parse("{\"model\":\"m\",\"input\":[1,2,999]}", &req, &err) == 0
       && req.n_inputs == 1 && req.text[0] == NULL && req.n_ids[0] == 3
       && req.ids[0][2] == 999,
       "an array of token ids: one input");
    llm_embed_request_free(&req);

    ok(parse("{\"model\":\"m\",\"input\":[[5],[6,7]],"
             "\"encoding_format\":\"float\"}", &req, &err) == 0
       && req.n_inputs == 2 && req.n_ids[0] == 1 && req.n_ids[1] == 2
       && req.ids[1][1] == 7 && !req.base64,
       "an array of arrays of ids: two inputs");
    llm_embed_request_free(&req);

    ok(parse("{\"model\":\"m\",\"input\":[\"x\",[3]]}", &req, &err) == 0
       && req.n_inputs == 2 && req.text[0] != NULL && req.ids[1] != NULL,
       "strings and id arrays mixed");
    llm_embed_request_free(&req);

    refused("{\"input\":\"a\"}", 400, "missing_required_parameter", "model",
            "no model");
    refused("{\"model\":\"m\"}", 400, "missing_required_parameter", "input",
            "no input");
    refused("{\"model\":\"m\",\"input\":\"\"}", 400, "invalid_value", "input",
            "an empty string");
    refused("{\"model\":\"m\",\"input\":[]}", 400, "invalid_value", "input",
            "an empty array");
    refused("{\"model\":\"m\",\"input\":[[]]}", 400, "invalid_value",
            "input", "an empty id array");
    refused("{\"model\":\"m\",\"input\":[1000]}", 400, "invalid_value",
            "input", "an id past the vocabulary");
    refused("{\"model\":\"m\",\"input\":[1.5]}", 400, "invalid_value",
            "input", "a fractional id");
    refused("{\"model\":\"m\",\"input\":[-1]}", 400, "invalid_value",
            "input", "a negative id");
    refused("{\"model\":\"m\",\"input\":[\"a\",3]}", 400, "invalid_type",
            "input", "a number among strings");
    refused("{\"model\":\"m\",\"input\":{\"a\":1}}", 400, "invalid_value",
            "input", "an object");
    refused("{\"model\":\"m\",\"input\":\"a\",\"encoding_format\":\"int8\"}",
            400, "invalid_value", "encoding_format", "encoding int8");
    refused("{\"model\":\"m\",\"input\":\"a\",\"dimensions\":0}", 400,
            "invalid_value", "dimensions", "dimensions 0");
    refused("{\"model\":\"m\",\"input\":\"a\",\"dimensions\":2.5}", 400,
            "invalid_value", "dimensions", "dimensions 2.5");
    refused("{\"model\":\"m\",\"input\":\"a\",\"dimensions\":\"8\"}", 400,
            "invalid_value", "dimensions", "dimensions as a string");
    refused("{\"model\":\"m\",\"input\":\"a\",\"user\":5}", 400,
            "invalid_type", "user", "user not a string");
    refused("{\"model\":\"m\",\"input\":\"a\"", 400, "invalid_json", "",
            "truncated JSON");
    refused("[1]", 400, "invalid_type", "", "a body that is not an object");
}


static void
test_many_inputs(void)
{
    llm_embed_request  req;
    llm_api_error      err;
    char              *body = malloc(16 + 4 * (LLM_EMBED_MAX_INPUTS + 1)
                                     + 64);
    char              *p = body;
    int                i, rc;

    p += sprintf(p, "{\"model\":\"m\",\"input\":[");
    for (i = 0; i <= LLM_EMBED_MAX_INPUTS; i++) {
        p += sprintf(p, "%s\"a\"", i ? "," : "");
    }
    strcpy(p, "]}");
    rc = parse(body, &req, &err);
    ok(rc == -1 && err.status == 400 && strcmp(err.param, "input") == 0,
       "%d inputs refused (%s)", LLM_EMBED_MAX_INPUTS + 1, err.message);
    llm_embed_request_free(&req);
    free(body);
}


static char *
print(cJSON *j, size_t *len)
{
    char  *t = j ? cJSON_PrintUnformatted(j) : NULL;

    cJSON_Delete(j);
    *len = t ? strlen(t) : 0;
    return t;
}


static void
test_reply(void)
{
    static const float  v0[3] = { 0.1f, -2.5e-8f, 1.0f / 3.0f };
    static const float  v1[3] = { -0.0f, 12345.678f, 1e-38f };
    const float        *vec[2] = { v0, v1 };
    unsigned char       bytes[64];
    char               *text;
    size_t              len = 0, n;
    cJSON              *root, *data, *e, *u;
    int                 i, same = 1;

    text = print(llm_embed_reply("m", vec, 2, 3, 0, 17), &len);
    root = text ? cJSON_Parse(text) : NULL;
    data = cJSON_GetObjectItem(root, "data");
    u = cJSON_GetObjectItem(root, "usage");
    ok(root != NULL && len == strlen(text)
       && strcmp(cJSON_GetObjectItem(root, "object")->valuestring, "list")
          == 0
       && strcmp(cJSON_GetObjectItem(root, "model")->valuestring, "m") == 0
       && cJSON_GetArraySize(data) == 2
       && cJSON_GetObjectItem(u, "prompt_tokens")->valueint == 17
       && cJSON_GetObjectItem(u, "total_tokens")->valueint == 17,
       "reply: list of 2, model, usage: %s", text ? text : "(null)");
    for (i = 0; i < 2 && cJSON_GetArraySize(data) == 2; i++) {
        e = cJSON_GetArrayItem(data, i);
        same &= strcmp(cJSON_GetObjectItem(e, "object")->valuestring,
                       "embedding") == 0
                && cJSON_GetObjectItem(e, "index")->valueint == i;
        for (n = 0; n < 3; n++) {
            float f = (float) cJSON_GetArrayItem(cJSON_GetObjectItem(
                          e, "embedding"), (int) n)->valuedouble;
            same &= memcmp(&f, &vec[i][n], 4) == 0 || (f == 0
                                                  && vec[i][n] == 0);
        }
    }
    ok(same, "float: each embedding object, index, values read back as "
       "the same floats");
    cJSON_Delete(root);
    free(text);

    text = print(llm_embed_reply("m", vec, 2, 3, 1, 17), &len);
    root = text ? cJSON_Parse(text) : NULL;
    data = cJSON_GetObjectItem(root, "data");
    same = cJSON_GetArraySize(data) == 2;
    for (i = 0; same && i < 2; i++) {
        e = cJSON_GetObjectItem(cJSON_GetArrayItem(data, i), "embedding");
        n = cJSON_IsString(e) ? b64_decode(e->valuestring, bytes) : 0;
        same &= n == 12;
        for (n = 0; same && n < 3; n++) {
            uint32_t u32;
            memcpy(&u32, &vec[i][n], 4);
            same &= bytes[4 * n] == (u32 & 255)
                    && bytes[4 * n + 1] == ((u32 >> 8) & 255)
                    && bytes[4 * n + 2] == ((u32 >> 16) & 255)
                    && bytes[4 * n + 3] == (u32 >> 24);
        }
    }
    ok(same, "base64: little-endian float32 bytes, bit for bit");
    cJSON_Delete(root);
    free(text);

    /* 1 and 2 trailing bytes: the padding */
    {
        static const float one[1] = { 1.0f };
        const float *v[1] = { one };
        text = print(llm_embed_reply("m", v, 1, 1, 1, 1), &len);
        ok(text != NULL && strstr(text, "\"AACAPw==\""),
           "1.0f is AACAPw== (numpy: base64 of float32 1.0)");
        free(text);
    }
}


int
main(void)
{
    test_parse();
    test_many_inputs();
    test_reply();
    return tap_done();
}
