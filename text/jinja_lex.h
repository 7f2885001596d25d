/* jinja lexer (internal): template text -> tokens, with jinja2's whitespace rules for
 * trim_blocks=True, lstrip_blocks=True, `-`/`+` tag modifiers and keep_trailing_newline=False. */
#ifndef TEXT_JINJA_LEX_H
#define TEXT_JINJA_LEX_H

#include "jinja_internal.h"

enum jtok {
    JT_EOF = 0,
    JT_DATA,        // text outside tags (val: str, may be empty)
    JT_VAR_BEGIN,   // {{
    JT_VAR_END,     // }}
    JT_BLOCK_BEGIN, // {%
    JT_BLOCK_END,   // %}
    JT_NAME,        // identifier (s, n)
    JT_STRING,      // string literal (val: decoded str)
    JT_INT,         // val
    JT_FLOAT,       // val
    JT_OP,          // op: one of the enum jop values
};

enum jop {
    JOP_ADD = 1,
    JOP_SUB,
    JOP_MUL,
    JOP_DIV,
    JOP_FLOORDIV,
    JOP_MOD,
    JOP_POW,
    JOP_TILDE,
    JOP_EQ,
    JOP_NE,
    JOP_LT,
    JOP_LE,
    JOP_GT,
    JOP_GE,
    JOP_ASSIGN,
    JOP_DOT,
    JOP_COMMA,
    JOP_COLON,
    JOP_PIPE,
    JOP_LPAREN,
    JOP_RPAREN,
    JOP_LBRACKET,
    JOP_RBRACKET,
    JOP_LBRACE,
    JOP_RBRACE,
    JOP_SEMICOLON,
};

struct jtoken {
    uint8_t type; // enum jtok
    uint8_t op;   // enum jop for JT_OP
    int line;
    const char *s; // source text of the token (names)
    size_t n;
    struct jinja_value val; // JT_DATA, JT_STRING, JT_INT, JT_FLOAT
};

struct jtokens {
    struct jtoken *v;
    size_t n, cap;
};

/* Tokenize; token strings live in arena a. Returns 0 or ERR_INVAL with err set. The caller frees
 * toks->v with free(). */
int jinja_lex(struct jarena *a, const char *src, size_t len, struct jtokens *toks,
              struct jinja_error *err);

#endif
