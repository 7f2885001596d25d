/* tensor_name: prefix-free tensor names, shared by the loader's grouping and quant's module
 * matching. */
#include "model/tensor_name.h"

#include "common/xalloc.h"

#include <string.h>

const char *tensor_name_canon(const char *name)
{
    static const char *const prefixes[] = {"model.language_model.", "language_model.model.",
                                           "model.", "language_model."};
    for (size_t i = 0; i < ARRAY_LEN(prefixes); i++) {
        size_t l = strlen(prefixes[i]);
        if (strncmp(name, prefixes[i], l) == 0)
            return name + l;
    }
    return name;
}
