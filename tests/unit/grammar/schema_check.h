/* schema_check: an independent JSON Schema validator for the subset of text/grammar.h, used by
 * the tests to check what the grammar produced (written from the spec, not from the automaton). */
#ifndef TESTS_SCHEMA_CHECK_H
#define TESTS_SCHEMA_CHECK_H

#include <cjson/cJSON.h>
#include <stdbool.h>

/* true when v conforms to schema. */
bool schema_check(const cJSON *schema, const cJSON *v);

#endif
