/* values: libgadget's value API, a thin layer over proto/value.c. */
#include "gadget.h"

#include <stdarg.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "value.h"

gadget_value *gadget_null(void) { return value_new_null(); }
gadget_value *gadget_bool(bool b) { return value_new_bool(b); }
gadget_value *gadget_int(int64_t i) { return value_new_int(i); }
gadget_value *gadget_double(double d) { return value_new_double(d); }
gadget_value *gadget_string(const char *s) { return s ? value_new_string(s) : NULL; }
gadget_value *gadget_bytes(const void *data, size_t len) { return value_new_bytes(data, len); }
gadget_value *gadget_list(void) { return value_new_list(); }
gadget_value *gadget_map(void) { return value_new_map(); }
void gadget_value_free(gadget_value *v) { value_free(v); }
gadget_value *gadget_copy(const gadget_value *v) { return v ? value_dup(v) : NULL; }

gadget_value *gadget_stringf(const char *fmt, ...)
{
        va_list ap;
        char *s = NULL;
        va_start(ap, fmt);
        int n = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (n < 0)
                return NULL;
        gadget_value *v = value_new_string_len(s, (size_t)n);
        free(s);
        return v;
}

int gadget_list_append(gadget_value *list, gadget_value *item)
{
        int e = value_list_append(list, item);
        return e == 0 ? 0 : e == -EINVAL ? -GADGET_EINVAL : -GADGET_EINTERNAL;
}

int gadget_map_set(gadget_value *map, const char *key, gadget_value *item)
{
        int e = value_map_set(map, key, item);
        return e == 0 ? 0 : e == -EINVAL ? -GADGET_EINVAL : -GADGET_EINTERNAL;
}

enum gadget_type gadget_type_of(const gadget_value *v)
{
        if (!v)
                return GADGET_INVALID;
        switch (v->kind_case) {
        case GADGET__VALUE__KIND_NULL_VALUE: return GADGET_NULL;
        case GADGET__VALUE__KIND_BOOL_VALUE: return GADGET_BOOL;
        case GADGET__VALUE__KIND_INT_VALUE: return GADGET_INT;
        case GADGET__VALUE__KIND_DOUBLE_VALUE: return GADGET_DOUBLE;
        case GADGET__VALUE__KIND_STRING_VALUE: return GADGET_STRING;
        case GADGET__VALUE__KIND_BYTES_VALUE: return GADGET_BYTES;
        case GADGET__VALUE__KIND_LIST_VALUE: return GADGET_LIST;
        case GADGET__VALUE__KIND_MAP_VALUE: return GADGET_MAP;
        default: return GADGET_INVALID;
        }
}

const gadget_value *gadget_map_get(const gadget_value *map, const char *key)
{
        return value_map_get(map, key);
}

size_t gadget_len(const gadget_value *v)
{
        switch (gadget_type_of(v)) {
        case GADGET_LIST: return v->list_value ? v->list_value->n_items : 0;
        case GADGET_MAP: return v->map_value ? v->map_value->n_entries : 0;
        case GADGET_STRING: return strlen(v->string_value);
        case GADGET_BYTES: return v->bytes_value.len;
        default: return 0;
        }
}

const gadget_value *gadget_list_at(const gadget_value *list, size_t i)
{
        if (gadget_type_of(list) != GADGET_LIST || !list->list_value || i >= list->list_value->n_items)
                return NULL;
        return list->list_value->items[i];
}

const char *gadget_map_key_at(const gadget_value *map, size_t i)
{
        if (gadget_type_of(map) != GADGET_MAP || !map->map_value || i >= map->map_value->n_entries)
                return NULL;
        return map->map_value->entries[i]->key;
}

const gadget_value *gadget_map_value_at(const gadget_value *map, size_t i)
{
        if (gadget_type_of(map) != GADGET_MAP || !map->map_value || i >= map->map_value->n_entries)
                return NULL;
        return map->map_value->entries[i]->value;
}

const char *gadget_as_string(const gadget_value *v)
{
        return value_string(v);
}

const void *gadget_as_bytes(const gadget_value *v, size_t *len)
{
        if (gadget_type_of(v) != GADGET_BYTES)
                return NULL;
        *len = v->bytes_value.len;
        return v->bytes_value.data ? (const void *)v->bytes_value.data : (const void *)"";
}

bool gadget_as_int(const gadget_value *v, int64_t *out)
{
        if (gadget_type_of(v) != GADGET_INT)
                return false;
        *out = v->int_value;
        return true;
}

bool gadget_as_double(const gadget_value *v, double *out)
{
        if (gadget_type_of(v) == GADGET_INT) {
                *out = (double)v->int_value;
                return true;
        }
        if (gadget_type_of(v) != GADGET_DOUBLE)
                return false;
        *out = v->double_value;
        return true;
}

bool gadget_as_bool(const gadget_value *v, bool *out)
{
        if (gadget_type_of(v) != GADGET_BOOL)
                return false;
        *out = v->bool_value;
        return true;
}
