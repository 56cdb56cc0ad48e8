/*
 * Tool calling on the request's side: tools, tool_choice and
 * parallel_tool_calls checked and kept in llm_api_request; the tool turns
 * of a conversation (assistant tool_calls, role "tool") checked; and the
 * messages and tools a chat template renders, for its format
 * (api/reply.h), as vLLM hands them to transformers: arguments of
 * past calls as objects, tools only when tool_choice is not "none". A
 * template without a tool format of ours (GENERIC) gets a system message
 * that describes the tools and the JSON to answer in, past calls as that
 * JSON and tool results as a user turn (docs/api.md, "Tool calling").
 *
 * defines: llm_tools_parse, llm_tools_message, llm_tools_template_input,
 *          llm_tools_system_prompt
 */
#ifndef NGX_LLM_TOOLS_H
#define NGX_LLM_TOOLS_H

#include <cjson/cJSON.h>

#include "api/request.h"

#define LLM_TOOLS_MAX           128     /* entries in tools (OpenAI's) */

/* fields of the request: tools, tool_choice, parallel_tool_calls and the
   deprecated functions / function_call (refused). 0, or -1 with err */
int llm_tools_parse(llm_api_request *req, const cJSON *root,
    llm_api_error *err);

/*
 * The tool parts of messages[i] (m, role already normal) into out: an
 * assistant's tool_calls, a tool message's tool_call_id. 0 or -1 with err.
 */
int llm_tools_message(const cJSON *m, const char *role, int i, cJSON *out,
    llm_api_error *err);

/*
 * What the template renders: *messages (new, cJSON_Delete it) and *tools
 * (borrowed from req, or NULL) for a template of format
 * (llm_tool_format_detect). -1 when memory ran out.
 */
int llm_tools_template_input(const llm_api_request *req, int format,
    cJSON **messages, const cJSON **tools);

/* the system message of the GENERIC format (malloc'ed), NULL on OOM */
char *llm_tools_system_prompt(const llm_api_request *req);

#endif /* NGX_LLM_TOOLS_H */
