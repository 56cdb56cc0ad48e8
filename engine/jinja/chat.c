/*
 * The variables transformers' apply_chat_template() hands a chat template,
 * built the same way (transformers 5.x, tokenization_utils_base.py and
 * utils/chat_template_utils.py):
 *
 *   - message keys whose value is null are dropped (_normalize_chat_messages);
 *   - a message with reasoning under "reasoning_content", "thinking" or
 *     "reasoning" gets it under both "thinking" (first) and
 *     "reasoning_content" (last) (_alias_reasoning_fields);
 *   - the tokenizer's special tokens (bos_token, eos_token, ...) come first,
 *     then messages, tools, documents (null when not given),
 *     add_generation_prompt, then any extra keyword arguments, which win.
 *
 * tools/render_templates.py records the context transformers really passed,
 * and t/unit/test_jinja.c checks that this function builds the same one.
 *
 * defines: jinja_chat_context
 */
#include <string.h>

#include "jinja/jinja.h"


static const char *const reasoning_fields[] = {
    "reasoning_content", "thinking", "reasoning", NULL
};


static const cJSON *
first_reasoning(const cJSON *msg)
{
    const cJSON  *v;

    for (int i = 0; reasoning_fields[i] != NULL; i++) {
        v = cJSON_GetObjectItemCaseSensitive(msg, reasoning_fields[i]);
        if (v != NULL && !cJSON_IsNull(v)) {
            return v;
        }
    }
    return NULL;
}


static int
add_copy(cJSON *obj, const char *key, const cJSON *v)
{
    cJSON  *copy = cJSON_Duplicate(v, 1);

    if (copy == NULL) {
        return -1;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(obj, key);
    cJSON_AddItemToObject(obj, key, copy);
    return 0;
}


static cJSON *
normalize_message(const cJSON *msg)
{
    const cJSON  *reasoning, *field;
    cJSON        *out;

    out = cJSON_CreateObject();
    if (out == NULL) {
        return NULL;
    }
    reasoning = first_reasoning(msg);
    if (reasoning != NULL && cJSON_GetObjectItemCaseSensitive(msg, "thinking") == NULL
        && add_copy(out, "thinking", reasoning) != 0) {
        goto fail;
    }
    cJSON_ArrayForEach(field, msg) {
        if (cJSON_IsNull(field) || field->string == NULL) {
            continue;
        }
        if (reasoning != NULL && strcmp(field->string, "thinking") == 0) {
            if (add_copy(out, "thinking", reasoning) != 0) {
                goto fail;
            }
            continue;
        }
        if (reasoning != NULL && strcmp(field->string, "reasoning_content") == 0) {
            continue;
        }
        if (add_copy(out, field->string, field) != 0) {
            goto fail;
        }
    }
    if (reasoning != NULL && add_copy(out, "reasoning_content", reasoning) != 0) {
        goto fail;
    }
    return out;

fail:
    cJSON_Delete(out);
    return NULL;
}


cJSON *
jinja_chat_context(const cJSON *messages, const cJSON *tools,
    int add_generation_prompt, const cJSON *special_tokens,
    const cJSON *extra)
{
    const cJSON  *v;
    cJSON        *ctx, *list, *msg;

    if (!cJSON_IsArray(messages)) {
        return NULL;
    }
    ctx = cJSON_CreateObject();
    if (ctx == NULL) {
        return NULL;
    }
    cJSON_ArrayForEach(v, special_tokens) {
        if (v->string != NULL && add_copy(ctx, v->string, v) != 0) {
            goto fail;
        }
    }
    list = cJSON_AddArrayToObject(ctx, "messages");
    if (list == NULL) {
        goto fail;
    }
    cJSON_ArrayForEach(v, messages) {
        if (!cJSON_IsObject(v) || (msg = normalize_message(v)) == NULL) {
            goto fail;
        }
        cJSON_AddItemToArray(list, msg);
    }
    if (tools != NULL && !cJSON_IsNull(tools)) {
        if (add_copy(ctx, "tools", tools) != 0) {
            goto fail;
        }
    } else if (cJSON_AddNullToObject(ctx, "tools") == NULL) {
        goto fail;
    }
    if (cJSON_AddNullToObject(ctx, "documents") == NULL
        || cJSON_AddBoolToObject(ctx, "add_generation_prompt",
                                 add_generation_prompt) == NULL) {
        goto fail;
    }
    cJSON_ArrayForEach(v, extra) {
        if (v->string != NULL && add_copy(ctx, v->string, v) != 0) {
            goto fail;
        }
    }
    return ctx;

fail:
    cJSON_Delete(ctx);
    return NULL;
}
