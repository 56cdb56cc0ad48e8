/*
 * Small files of a Hugging Face model directory, read without loading
 * weights: by the engine's loader and by nginx at configuration time
 * (chat template, context length).
 *
 * defines: llm_hf_read_at, llm_hf_chat_template, llm_hf_context_length
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "format/hf_config.h"


/*
 * The whole of dir/name, NUL-terminated. NULL with err set; a missing
 * file that is not required leaves err empty.
 */
char *
llm_hf_read_at(int dirfd, const char *dir, const char *name, int required,
    size_t *len, char *err, size_t errlen)
{
    struct stat   st;
    char         *buf = NULL;
    ssize_t       got;
    size_t        off = 0;
    int           fd;

    err[0] = '\0';
    fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (required || errno != ENOENT) {
            snprintf(err, errlen, "%s/%s: cannot open: %s", dir, name,
                     strerror(errno));
        }
        return NULL;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)
        || (uint64_t) st.st_size > HF_MAX_JSON)
    {
        snprintf(err, errlen, "%s/%s: not a regular file of at most %u "
                 "bytes", dir, name, HF_MAX_JSON);
        close(fd);
        return NULL;
    }
    buf = malloc((size_t) st.st_size + 1);
    while (buf != NULL && off < (size_t) st.st_size) {
        got = read(fd, buf + off, (size_t) st.st_size - off);
        if (got <= 0) {
            snprintf(err, errlen, "%s/%s: read failed", dir, name);
            free(buf);
            buf = NULL;
            break;
        }
        off += (size_t) got;
    }
    if (buf == NULL && err[0] == '\0') {
        snprintf(err, errlen, "%s/%s: out of memory", dir, name);
    }
    close(fd);
    if (buf != NULL) {
        buf[off] = '\0';
        *len = off;
    }
    return buf;
}


char *
llm_hf_chat_template(int dirfd, const char *dir, char *err, size_t errlen)
{
    char          *text, *out = NULL;
    size_t         len;
    cJSON         *root;
    const cJSON   *t, *e;

    /* transformers >= 4.43 may save it beside the config */
    text = llm_hf_read_at(dirfd, dir, "chat_template.jinja", 0, &len, err, errlen);
    if (text != NULL || err[0] != '\0') {
        return text;
    }
    text = llm_hf_read_at(dirfd, dir, "tokenizer_config.json", 0, &len, err,
                   errlen);
    if (text == NULL) {
        return NULL;
    }
    root = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsObject(root)) {
        snprintf(err, errlen, "%s/tokenizer_config.json: not a JSON object",
                 dir);
        cJSON_Delete(root);
        return NULL;
    }
    t = cJSON_GetObjectItemCaseSensitive(root, "chat_template");
    if (cJSON_IsArray(t)) {
        /* [{"name": "default", "template": ...}, {"name": "tool_use"...}] */
        cJSON_ArrayForEach(e, t) {
            const char *name = cJSON_GetStringValue(
                cJSON_GetObjectItemCaseSensitive(e, "name"));
            if (name != NULL && strcmp(name, "default") == 0) {
                t = cJSON_GetObjectItemCaseSensitive(e, "template");
                break;
            }
        }
    }
    if (cJSON_IsString(t)) {
        out = strdup(t->valuestring);
        if (out == NULL) {
            snprintf(err, errlen, "%s: out of memory", dir);
        }
    } else if (t != NULL && !cJSON_IsNull(t)) {
        snprintf(err, errlen, "%s/tokenizer_config.json: chat_template is "
                 "neither a string nor a list with a \"default\" entry", dir);
    }
    cJSON_Delete(root);
    return out;
}



int
llm_hf_context_length(int dirfd, const char *dir)
{
    int           n = 0;
    char          err[512], *text;
    size_t        len;
    cJSON        *root;
    const cJSON  *v;

    text = llm_hf_read_at(dirfd, dir, "config.json", 1, &len, err,
                          sizeof(err));
    if (text == NULL) {
        return 0;
    }
    root = cJSON_ParseWithLength(text, len);
    free(text);
    v = cJSON_GetObjectItemCaseSensitive(root, "max_position_embeddings");
    if (cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble < 1e9) {
        n = (int) v->valuedouble;
    }
    cJSON_Delete(root);
    return n;
}
