/* gw_openai: the generation endpoints (POST /v1/chat/completions, /v1/completions) and
 * POST /tokenize, POST /detokenize. Rendering and tokenization run on the libuv threadpool;
 * everything else on the loop thread. */
#ifndef GW_OPENAI_H
#define GW_OPENAI_H

#include "gw_req.h"

struct gw;
struct gw_exch;

void gw_openai_generate(struct gw *gw, struct gw_exch *x, enum gw_req_kind kind);
void gw_openai_tokenize(struct gw *gw, struct gw_exch *x);
void gw_openai_detokenize(struct gw *gw, struct gw_exch *x);
/* The max_model_len in force: the scheduler's when known, else the configured one. */
int64_t gw_openai_max_model_len(const struct gw *gw);
/* The served model id: the configured name. */
const char *gw_openai_model(const struct gw *gw);

#endif
