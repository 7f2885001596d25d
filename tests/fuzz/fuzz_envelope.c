/* fuzz_envelope: protobuf-c unpack of tern.Envelope (every message of proto/tern.proto) from
 * arbitrary bytes under the same bounded allocator budget as msg_recv, then a pack round trip:
 * pack(unpack(b)) unpacks again (see the tag-0 note below) and packs to the same bytes. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "proto/tern.pb-c.h"

struct budget {
    size_t left;
};

static void *budget_alloc(void *data, size_t n)
{
    struct budget *b = data;
    if (n > b->left)
        return NULL;
    b->left -= n;
    return malloc(n);
}

static void budget_free(void *data, void *p)
{
    (void)data;
    free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct budget b = {.left = size * 8 + 4096};
    ProtobufCAllocator alloc = {.alloc = budget_alloc, .free = budget_free, .allocator_data = &b};
    Tern__Envelope *env = tern__envelope__unpack(&alloc, size, data);
    if (!env)
        return 0;
    size_t n1 = tern__envelope__get_packed_size(env);
    uint8_t *p1 = malloc(n1 ? n1 : 1);
    if (tern__envelope__pack(env, p1) != n1)
        __builtin_trap();
    Tern__Envelope *env2 = tern__envelope__unpack(NULL, n1, p1);
    if (!env2) {
        /* protobuf-c 1.4.1 keeps an unknown field with tag 0 written as a 2-byte key ("82 00")
         * and re-packs it as "02", which its unpacker refuses: a library quirk, noted in
         * docs/RELIABILITY.md. Our code re-packs a received message only in the worker's Reset
         * echo. Nothing else to check for such input. */
        free(p1);
        tern__envelope__free_unpacked(env, &alloc);
        return 0;
    }
    size_t n2 = tern__envelope__get_packed_size(env2);
    uint8_t *p2 = malloc(n2 ? n2 : 1);
    tern__envelope__pack(env2, p2);
    if (n1 != n2 || memcmp(p1, p2, n1) != 0)
        __builtin_trap();
    free(p1);
    free(p2);
    tern__envelope__free_unpacked(env2, NULL);
    tern__envelope__free_unpacked(env, &alloc);
    return 0;
}
