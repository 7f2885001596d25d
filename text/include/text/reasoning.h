/* reasoning: splits a model's output stream into reasoning and content (Qwen3.5/3.6 "<think>").
 *
 * thinking=true (the prompt ended with "<think>"): text is reasoning until "</think>" (swallowed)
 * or "<tool_call>" (kept: it starts the content); a "<think>" at the very start of the output is
 * swallowed; if the output ends before either tag, all of it was reasoning.
 * thinking=false: text is content, except that an output starting with "<think>" is explicit
 * reasoning up to "</think>" as above. Nothing else is ever filed as reasoning.
 * Whitespace right after "</think>" is dropped. Partial tags are held back until they resolve;
 * text that only looked like a tag prefix is released. Results do not depend on how the text is
 * split into deltas. Typical chain: detok -> stop -> reasoning -> toolcall.
 */
#ifndef TEXT_REASONING_H
#define TEXT_REASONING_H

#include <stdbool.h>
#include <stddef.h>

struct reasoning;

struct reasoning_out {
    const char *reasoning; /* new reasoning text (owned by the parser, valid until next call) */
    size_t reasoning_len;
    const char *content; /* new content text (same ownership) */
    size_t content_len;
};

struct reasoning *reasoning_create(bool thinking);
/* The value for reasoning_create's thinking from the rendered prompt: true when the prompt's last
 * "<think>" is not closed by a later "</think>" (the generation starts inside reasoning). */
bool reasoning_prompt_opens_think(const char *prompt, size_t len);
void reasoning_destroy(struct reasoning *r);
/* Feed a text delta; out receives what can be emitted now (either part may be empty). */
void reasoning_feed(struct reasoning *r, const char *text, size_t len, struct reasoning_out *out);
/* End of stream: releases held-back text. */
void reasoning_flush(struct reasoning *r, struct reasoning_out *out);
/* True while the parser is inside reasoning (for finish handling / metrics). */
bool reasoning_in_reasoning(const struct reasoning *r);

#endif
