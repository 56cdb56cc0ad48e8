/*
 * Qwen3-Coder's XML tool calls (Qwen3-Coder, Qwen3.5): the body of one
 * <tool_call>...</tool_call> is
 *
 *   <function=NAME>
 *   <parameter=P>
 *   value
 *   </parameter>
 *   ...
 *   </function>
 *
 * Each value is text; it becomes JSON by the type the tool's schema gives
 * the parameter, as vLLM's qwen3coder parser does: string as it is,
 * integer / number a number, boolean true / false, object / array the
 * JSON it reads as; a value that is not what its type says, or a
 * parameter the schema does not type, stays a string. One newline after
 * the opening tag and before the closing one is the format's, not the
 * value's.
 *
 * defines: llm_tool_xml_call
 */
#ifndef NGX_LLM_API_TOOL_XML_H
#define NGX_LLM_API_TOOL_XML_H

#include <stddef.h>
#include <cjson/cJSON.h>

/*
 * s[0..n): the body of one <tool_call>. tools: the request's (OpenAI's
 * shape, for the parameters' types; may be NULL). Returns 0 with *name
 * (malloc'd) and *args (an object), or -1 with why (why_len bytes) said.
 */
int llm_tool_xml_call(const char *s, size_t n, const cJSON *tools,
    char **name, cJSON **args, char *why, size_t why_len);

#endif /* NGX_LLM_API_TOOL_XML_H */
