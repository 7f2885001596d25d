/* grammar_tools: the grammar of forced tool calls (tool_choice "required" or a named function).
 * A spec (JSON text naming the tools, the forced name, whether several calls may follow) compiles
 * into a grammar of text/grammar.h whose automaton accepts exactly qwen3_coder tool-call blocks,
 * as the Qwen3.5 chat template writes them and text/toolcall.c parses them:
 *   <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n...</function>\n</tool_call>
 * Whitespace (at most GRAMMAR_WS_MAX bytes) may come before each block and after the last one,
 * and then the text ends. Function names: the listed ones (or the named one). Parameters: the names
 * in `parameters.properties`, in that order, each at most once, the `required` ones always. Values
 * of parameters whose schema has no type or allows "string": raw text without </parameter>,
 * </function> or </tool_call> (one of a string enum/const when all its values are plain text);
 * other values: a JSON value under the property's schema (grammar_compile's subset), under its
 * types alone when the schema uses a keyword outside that subset, or any JSON value. */
#ifndef TEXT_GRAMMAR_TOOLS_H
#define TEXT_GRAMMAR_TOOLS_H

#include <stdbool.h>
#include <stddef.h>

struct grammar;

#define GRAMMAR_TOOLS_MAX 64       // tools under "required" (a named choice: any number)
#define GRAMMAR_TOOLS_NAME_MAX 256 // bytes of a function or parameter name

/* The spec text for tools_json (the request's "tools" array, OpenAI shape), name (the forced
 * function, exactly one call; NULL: any listed one) and parallel (false: exactly one call; true:
 * one or more; ignored with a name).
 * Returns a malloc'd NUL-terminated string (free() it), NULL when tools_json is not a JSON array.
 */
char *grammar_tools_spec(const char *tools_json, const char *name, bool parallel);
/* The text (len bytes) is a spec made by grammar_tools_spec, not a JSON Schema. */
bool grammar_tools_is_spec(const char *text, size_t len);
/* Compile a spec. NULL with a one-line reason in err when it is malformed or cannot be enforced:
 * more than GRAMMAR_TOOLS_MAX tools under "required", more than GRAMMAR_PROPS_MAX properties of a
 * called function, a name that is empty, longer than GRAMMAR_TOOLS_NAME_MAX or holds '>', '<'
 * or a control byte, the named function not listed, more than GRAMMAR_NODES_MAX nodes in all. Free
 * with grammar_destroy. */
struct grammar *grammar_tools_compile(const char *spec, size_t len, char *err, size_t errlen);
/* A spec or a JSON Schema: grammar_tools_compile or grammar_compile. */
struct grammar *grammar_compile_any(const char *text, size_t len, char *err, size_t errlen);

#endif
