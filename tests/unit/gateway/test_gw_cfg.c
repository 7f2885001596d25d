/* gw_cfg: defaults, repeated --api-key, TERN_API_KEY, --api-key-file, range errors, and that
 * the effective-config line never prints a key. Also gw_arena: alignment, big blocks, cleanups
 * in reverse order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "gw_arena.h"
#include "gw_cfg.h"
#include "test.h"

static int parse(struct gw_cfg *c, char **argv)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    return gw_cfg_parse(c, argc, argv);
}

static void test_defaults(void)
{
    struct gw_cfg c;
    char *argv[] = {"gw", "--scheduler-endpoint", "ipc:///tmp/x.sock", NULL};
    unsetenv("TERN_API_KEY");
    CHECK_EQ_INT(parse(&c, argv), 0);
    CHECK_STREQ(c.host, "127.0.0.1");
    CHECK_EQ_INT(c.port, 8000);
    CHECK_EQ_INT(c.body_max, 4 << 20);
    CHECK_EQ_INT(c.url_max, 8192);
    CHECK_EQ_INT(c.header_field_max, 8192);
    CHECK_EQ_INT(c.headers_total_max, 32768);
    CHECK_EQ_INT(c.headers_max, 100);
    CHECK_EQ_INT(c.header_timeout_ms, 10000);
    CHECK_EQ_INT(c.body_idle_ms, 30000);
    CHECK_EQ_INT(c.n_api_keys, 0);
    CHECK_STREQ(c.allowed_origins, ""); /* CORS off by default */
    CHECK_STREQ(c.default_template_kwargs, "");
    CHECK_EQ_INT(c.sse_ping_ms, 10000);
    gw_cfg_deinit(&c);
}

static void test_keys(void)
{
    char path[] = "/tmp/gwcfg-keys-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("# keys\nfilekey1\n  filekey2  \n\n", f);
    fclose(f);
    struct gw_cfg c;
    setenv("TERN_API_KEY", "envkey", 1);
    char *a1[] = {"gw", "--scheduler-endpoint", "ipc:///tmp/x.sock", NULL};
    CHECK_EQ_INT(parse(&c, a1), 0);
    CHECK_EQ_INT(c.n_api_keys, 1);
    CHECK_STREQ(c.api_keys[0], "envkey");
    gw_cfg_deinit(&c);
    /* flags replace the environment; repeated and comma-separated; plus the file */
    char *a2[] = {"gw",
                  "--api-key",
                  "a",
                  "--api-key=b,c",
                  "--api-key-file",
                  path,
                  "--scheduler-endpoint",
                  "ipc:///tmp/x.sock",
                  NULL};
    CHECK_EQ_INT(parse(&c, a2), 0);
    CHECK_EQ_INT(c.n_api_keys, 5);
    CHECK_STREQ(c.api_keys[0], "a");
    CHECK_STREQ(c.api_keys[1], "b");
    CHECK_STREQ(c.api_keys[2], "c");
    CHECK_STREQ(c.api_keys[3], "filekey1");
    CHECK_STREQ(c.api_keys[4], "filekey2");
    gw_cfg_deinit(&c);
    unsetenv("TERN_API_KEY");
    unlink(path);
    char *a3[] = {
        "gw", "--api-key-file", "/nonexistent/keys", "--scheduler-endpoint", "ipc:///tmp/x.sock",
        NULL};
    CHECK_EQ_INT(parse(&c, a3), ERR_INVAL);
    gw_cfg_deinit(&c);
}

static void test_errors(void)
{
    struct gw_cfg c;
    char *a1[] = {"gw", "--port", "70000", NULL};
    CHECK_EQ_INT(parse(&c, a1), ERR_INVAL);
    char *a2[] = {"gw", "--scheduler-endpoint", "http://nope", NULL};
    CHECK_EQ_INT(parse(&c, a2), ERR_INVAL);
    char *a3[] = {"gw", "--log-level", "loud", "--scheduler-endpoint", "ipc:///tmp/x.sock", NULL};
    CHECK_EQ_INT(parse(&c, a3), ERR_INVAL);
    char *a4[] = {"gw", "--no-such-flag", "1", NULL};
    CHECK_EQ_INT(parse(&c, a4), ERR_INVAL);
    /* default template kwargs must be a JSON object */
    char *a5[] = {"gw",
                  "--scheduler-endpoint",
                  "ipc:///tmp/x.sock",
                  "--default-chat-template-kwargs",
                  "[1,2]",
                  NULL};
    CHECK_EQ_INT(parse(&c, a5), ERR_INVAL);
    char *a6[] = {"gw",
                  "--scheduler-endpoint",
                  "ipc:///tmp/x.sock",
                  "--default-chat-template-kwargs",
                  "{\"enable_thinking\":",
                  NULL};
    CHECK_EQ_INT(parse(&c, a6), ERR_INVAL);
    char *a7[] = {"gw",
                  "--scheduler-endpoint",
                  "ipc:///tmp/x.sock",
                  "--default-chat-template-kwargs",
                  "{\"enable_thinking\": false}",
                  "--allowed-origins",
                  "*",
                  "--sse-ping-ms",
                  "0",
                  NULL};
    CHECK_EQ_INT(parse(&c, a7), 0);
    CHECK_STREQ(c.allowed_origins, "*");
    CHECK_EQ_INT(c.sse_ping_ms, 0);
    gw_cfg_deinit(&c);
}

static int order[4];
static int n_order;

static void note(void *p)
{
    order[n_order++] = *(int *)p;
}

static void test_arena(void)
{
    struct gw_arena *a = gw_arena_create(64);
    static int one = 1, two = 2;
    gw_arena_cleanup_add(a, note, &one);
    for (int i = 1; i < 200; i++) {
        unsigned char *p = gw_arena_alloc(a, (size_t)i * 7);
        CHECK(((uintptr_t)p & 15) == 0);
        CHECK(p[0] == 0 && p[(size_t)i * 7 - 1] == 0);
        memset(p, 0xab, (size_t)i * 7);
    }
    char *s = gw_arena_strndup(a, "hello world", 5);
    CHECK_STREQ(s, "hello");
    gw_arena_cleanup_add(a, note, &two);
    gw_arena_destroy(a);
    CHECK_EQ_INT(n_order, 2);
    CHECK_EQ_INT(order[0], 2); /* last added runs first */
    CHECK_EQ_INT(order[1], 1);
    gw_arena_destroy(NULL);
}

int main(void)
{
    test_defaults();
    test_keys();
    test_errors();
    test_arena();
    return test_result();
}
