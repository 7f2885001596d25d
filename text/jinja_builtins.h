/* jinja builtin ids (internal): one X-macro table gives the enum and the names. Each group sits
 * between *_BEGIN and *_END markers so a name lookup is a scan of its group. */
#ifndef TEXT_JINJA_BUILTINS_H
#define TEXT_JINJA_BUILTINS_H

#include "common/xalloc.h"
#include "jinja_internal.h"

#define BUILTIN_TABLE(X)                                                                           \
    X(B_FILTERS_BEGIN, NULL)                                                                       \
    X(F_ABS, "abs")                                                                                \
    X(F_CAPITALIZE, "capitalize")                                                                  \
    X(F_COUNT, "count")                                                                            \
    X(F_DEFAULT, "default")                                                                        \
    X(F_DICTSORT, "dictsort")                                                                      \
    X(F_ESCAPE, "escape")                                                                          \
    X(F_FIRST, "first")                                                                            \
    X(F_FLOAT, "float")                                                                            \
    X(F_FORMAT, "format")                                                                          \
    X(F_INDENT, "indent")                                                                          \
    X(F_INT, "int")                                                                                \
    X(F_ITEMS, "items")                                                                            \
    X(F_JOIN, "join")                                                                              \
    X(F_LAST, "last")                                                                              \
    X(F_LENGTH, "length")                                                                          \
    X(F_LIST, "list")                                                                              \
    X(F_LOWER, "lower")                                                                            \
    X(F_MAP, "map")                                                                                \
    X(F_MAX, "max")                                                                                \
    X(F_MIN, "min")                                                                                \
    X(F_REJECT, "reject")                                                                          \
    X(F_REJECTATTR, "rejectattr")                                                                  \
    X(F_REPLACE, "replace")                                                                        \
    X(F_REVERSE, "reverse")                                                                        \
    X(F_ROUND, "round")                                                                            \
    X(F_SAFE, "safe")                                                                              \
    X(F_SELECT, "select")                                                                          \
    X(F_SELECTATTR, "selectattr")                                                                  \
    X(F_SORT, "sort")                                                                              \
    X(F_STRING, "string")                                                                          \
    X(F_SUM, "sum")                                                                                \
    X(F_TOJSON, "tojson")                                                                          \
    X(F_TRIM, "trim")                                                                              \
    X(F_UNIQUE, "unique")                                                                          \
    X(F_UPPER, "upper")                                                                            \
    X(B_FILTERS_END, NULL)                                                                         \
    X(B_TESTS_BEGIN, NULL)                                                                         \
    X(T_DEFINED, "defined")                                                                        \
    X(T_UNDEFINED, "undefined")                                                                    \
    X(T_NONE, "none")                                                                              \
    X(T_STRING, "string")                                                                          \
    X(T_NUMBER, "number")                                                                          \
    X(T_INTEGER, "integer")                                                                        \
    X(T_FLOAT, "float")                                                                            \
    X(T_BOOLEAN, "boolean")                                                                        \
    X(T_TRUE, "true")                                                                              \
    X(T_FALSE, "false")                                                                            \
    X(T_MAPPING, "mapping")                                                                        \
    X(T_ITERABLE, "iterable")                                                                      \
    X(T_SEQUENCE, "sequence")                                                                      \
    X(T_CALLABLE, "callable")                                                                      \
    X(T_ESCAPED, "escaped")                                                                        \
    X(T_LOWER, "lower")                                                                            \
    X(T_UPPER, "upper")                                                                            \
    X(T_ODD, "odd")                                                                                \
    X(T_EVEN, "even")                                                                              \
    X(T_DIVISIBLEBY, "divisibleby")                                                                \
    X(T_SAMEAS, "sameas")                                                                          \
    X(T_EQ, "eq")                                                                                  \
    X(T_NE, "ne")                                                                                  \
    X(T_LT, "lt")                                                                                  \
    X(T_LE, "le")                                                                                  \
    X(T_GT, "gt")                                                                                  \
    X(T_GE, "ge")                                                                                  \
    X(T_IN, "in")                                                                                  \
    X(B_TESTS_END, NULL)                                                                           \
    X(B_GLOBALS_BEGIN, NULL)                                                                       \
    X(G_RAISE_EXCEPTION, "raise_exception")                                                        \
    X(G_NAMESPACE, "namespace")                                                                    \
    X(G_RANGE, "range")                                                                            \
    X(G_DICT, "dict")                                                                              \
    X(G_STRFTIME_NOW, "strftime_now")                                                              \
    X(B_GLOBALS_END, NULL)                                                                         \
    X(B_METHODS_BEGIN, NULL)                                                                       \
    X(M_STR_BEGIN, NULL)                                                                           \
    X(M_STARTSWITH, "startswith")                                                                  \
    X(M_ENDSWITH, "endswith")                                                                      \
    X(M_SPLIT, "split")                                                                            \
    X(M_RSPLIT, "rsplit")                                                                          \
    X(M_STRIP, "strip")                                                                            \
    X(M_LSTRIP, "lstrip")                                                                          \
    X(M_RSTRIP, "rstrip")                                                                          \
    X(M_REPLACE, "replace")                                                                        \
    X(M_UPPER, "upper")                                                                            \
    X(M_LOWER, "lower")                                                                            \
    X(M_CAPITALIZE, "capitalize")                                                                  \
    X(M_FIND, "find")                                                                              \
    X(M_RFIND, "rfind")                                                                            \
    X(M_COUNT, "count")                                                                            \
    X(M_SPLITLINES, "splitlines")                                                                  \
    X(M_JOIN, "join")                                                                              \
    X(M_ISDIGIT, "isdigit")                                                                        \
    X(M_ISALPHA, "isalpha")                                                                        \
    X(M_ISSPACE, "isspace")                                                                        \
    X(M_STR_END, NULL)                                                                             \
    X(M_DICT_BEGIN, NULL)                                                                          \
    X(M_ITEMS, "items")                                                                            \
    X(M_KEYS, "keys")                                                                              \
    X(M_VALUES, "values")                                                                          \
    X(M_GET, "get")                                                                                \
    X(M_DICT_END, NULL)                                                                            \
    X(M_INDEX, "index")                                                                            \
    X(M_CYCLE, "cycle")                                                                            \
    X(M_CHANGED, "changed")                                                                        \
    X(B_METHODS_END, NULL)

enum jinja_builtin {
#define X(id, name) id,
    BUILTIN_TABLE(X)
#undef X
        B_COUNT
};

#endif
