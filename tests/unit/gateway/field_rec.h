/* field_rec: records the keys looked up on JSON objects, for test_api_fields: a parser compiled
 * with "#define cJSON_GetObjectItemCaseSensitive field_rec_get" reports every key it reads. */
#ifndef FIELD_REC_H
#define FIELD_REC_H

struct cJSON;

/* cJSON_GetObjectItemCaseSensitive, noting (obj, name). */
struct cJSON *field_rec_get(const struct cJSON *obj, const char *name);
/* Forget what was noted. */
void field_rec_reset(void);
/* The i-th name noted on obj since the reset (duplicates included), NULL past the last. */
const char *field_rec_name(const struct cJSON *obj, int i);

#endif
