/*
 * Kinds of output constraint (structured outputs, tool calls): what the
 * worker puts in a ring slot's constraint_kind and the grammar compiler
 * reads. Constants only, so every layer may include it.
 */
#ifndef NGX_LLM_CONSTRAINT_H
#define NGX_LLM_CONSTRAINT_H

#define LLM_CONSTRAINT_NONE         0
#define LLM_CONSTRAINT_JSON_OBJECT  1   /* any JSON object; text ignored */
#define LLM_CONSTRAINT_JSON_SCHEMA  2   /* the schema's JSON text */
#define LLM_CONSTRAINT_GRAMMAR      3   /* GBNF, our dialect (grammar.h) */
#define LLM_CONSTRAINT_REGEX        4   /* the whole output */

#define LLM_CONSTRAINT_MAX_BYTES    65536   /* of text; past it: 400 */

/* the JSON of json_object, json_schema and %json (llm_json_whitespace) */
#define LLM_JSON_WS_COMPACT         0   /* no blank between JSON tokens */
#define LLM_JSON_WS_FLEXIBLE        1   /* up to max_ws blanks in a row */

#endif /* NGX_LLM_CONSTRAINT_H */
