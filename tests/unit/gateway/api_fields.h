/* api_fields: the field list of docs/API.md (between <!-- field-list:begin --> and
 * <!-- field-list:end -->) read into rows, for the tests that walk it (test_api_fields,
 * test_api_walk). A row: | `field` | endpoints | `value` [with `{...}`] | class | tern | vLLM |
 * tested in (`path`, ...) |. */
#ifndef API_FIELDS_H
#define API_FIELDS_H

#define API_EP_CHAT 1u        /* POST /v1/chat/completions */
#define API_EP_COMPLETIONS 2u /* POST /v1/completions */
#define API_EP_RESPONSES 4u   /* POST /v1/responses */
#define API_FIELDS_MAX 256
#define API_TESTED_MAX 4

enum api_class {
    API_CLASS_EFFECT = 0, /* changes the answer; tested[] checks it */
    API_CLASS_IGNORED,    /* accepted with no effect, on purpose */
    API_CLASS_REFUSED,    /* this value is a 400 naming the field */
};

struct api_field {
    char name[64];   /* the top-level key */
    unsigned eps;    /* API_EP_* bits */
    char value[256]; /* JSON the walk sends */
    char with[256];  /* JSON object of other fields it needs, or "" */
    enum api_class cls;
    char tested[API_TESTED_MAX][128]; /* repository paths; "" = none */
    int line;                         /* in docs/API.md */
};

/* Rows of the field list in text (docs/API.md) into out (max of them). Returns the count, or -1
 * after printing "docs/API.md:LINE: why" for a malformed row or a missing list. */
int api_fields_parse(const char *text, struct api_field *out, int max);
/* "chat", "completions", "responses" for one API_EP_* bit. */
const char *api_ep_name(unsigned ep);

#endif
