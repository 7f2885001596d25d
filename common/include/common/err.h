/* Status codes: 0 ok, -errno for failed syscalls, ERR_* (< -1000) for our own conditions.
 * One X-macro table generates both the enum and err_str(). */
#ifndef COMMON_ERR_H
#define COMMON_ERR_H

#define ERR_TABLE(X)                                                   \
    X(ERR_INVAL, -1001, "invalid argument")                            \
    X(ERR_NOMEM, -1002, "out of memory")                               \
    X(ERR_FULL, -1003, "full")                                         \
    X(ERR_AGAIN, -1004, "try again")                                   \
    X(ERR_PROTO, -1005, "protocol error")                              \
    X(ERR_CUDA, -1006, "cuda error")                                   \
    X(ERR_IO, -1007, "i/o error")                                      \
    X(ERR_FORMAT, -1008, "bad file format")                            \
    X(ERR_NOTFOUND, -1009, "not found")                                \
    X(ERR_UNSUPPORTED, -1010, "unsupported")                           \
    X(ERR_TOOBIG, -1011, "too big")                                    \
    X(ERR_TIMEOUT, -1012, "timed out")                                 \
    X(ERR_CLOSED, -1013, "closed")                                     \
    X(ERR_VERSION, -1014, "protocol version mismatch")                 \
    X(ERR_RANGE, -1015, "out of range")                                \
    X(ERR_STATE, -1016, "wrong state")

enum err_code {
#define ERR_ENUM(name, val, str) name = (val),
    ERR_TABLE(ERR_ENUM)
#undef ERR_ENUM
};

/* Human-readable text for any status (ours or -errno). Never NULL; static storage. */
const char *err_str(int rc);

#endif
