/* value_preview: a value as a short line of JSON-like text for a person
 * (gadgetctl trace NAME), cut at a fixed size. Pure code. */
#include "value.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* The text being written: at most cap bytes, then the mark of the cut. */
struct preview {
        char *out;
        size_t cap, n;
        bool cut;
};

static const char cut_mark[] = "\xe2\x80\xa6"; /* U+2026, the ellipsis */

/* Appends k bytes of s, or what fits (never half a UTF-8 character) and
 * the mark: from then on nothing more is written. Why the walk stays
 * bounded: every item writes at least one byte, so a value of any size
 * costs at most cap steps before the cut ends it. */
static void put(struct preview *p, const char *s, size_t k)
{
        if (p->cut)
                return;
        if (p->n + k <= p->cap) {
                memcpy(p->out + p->n, s, k);
                p->n += k;
                return;
        }
        size_t fit = p->cap - p->n;
        while (fit > 0 && ((unsigned char)s[fit] & 0xc0) == 0x80)
                fit--;
        memcpy(p->out + p->n, s, fit);
        p->n += fit;
        memcpy(p->out + p->n, cut_mark, sizeof cut_mark - 1);
        p->n += sizeof cut_mark - 1;
        p->cut = true;
}

static void put_str(struct preview *p, const char *s)
{
        put(p, s, strlen(s));
}

/* A string in quotes, control bytes, quotes and backslashes escaped. */
static void put_quoted(struct preview *p, const char *s)
{
        char esc[8];
        put(p, "\"", 1);
        for (const char *c = s; *c && !p->cut; c++) {
                unsigned char b = (unsigned char)*c;
                if (b == '"' || b == '\\') {
                        esc[0] = '\\';
                        esc[1] = (char)b;
                        put(p, esc, 2);
                } else if (b < 0x20 || b == 0x7f) {
                        snprintf(esc, sizeof esc, "\\u%04x", b);
                        put_str(p, esc);
                } else {
                        size_t k = 1;
                        while (c[k] && ((unsigned char)c[k] & 0xc0) == 0x80)
                                k++;
                        put(p, c, k);
                        c += k - 1;
                }
        }
        put(p, "\"", 1);
}

static void put_value(struct preview *p, const Gadget__Value *v)
{
        char num[48];
        if (!v) {
                put_str(p, "null");
                return;
        }
        switch (v->kind_case) {
        case GADGET__VALUE__KIND_BOOL_VALUE:
                put_str(p, v->bool_value ? "true" : "false");
                return;
        case GADGET__VALUE__KIND_INT_VALUE:
                snprintf(num, sizeof num, "%" PRId64, v->int_value);
                put_str(p, num);
                return;
        case GADGET__VALUE__KIND_DOUBLE_VALUE:
                snprintf(num, sizeof num, "%.17g", v->double_value);
                put_str(p, num);
                return;
        case GADGET__VALUE__KIND_STRING_VALUE:
                put_quoted(p, v->string_value);
                return;
        case GADGET__VALUE__KIND_BYTES_VALUE:
                /* Bytes are never shown, only their size. */
                snprintf(num, sizeof num, "<%zu bytes>", v->bytes_value.len);
                put_str(p, num);
                return;
        case GADGET__VALUE__KIND_LIST_VALUE:
                put(p, "[", 1);
                for (size_t i = 0; i < v->list_value->n_items && !p->cut; i++) {
                        if (i)
                                put(p, ",", 1);
                        put_value(p, v->list_value->items[i]);
                }
                put(p, "]", 1);
                return;
        case GADGET__VALUE__KIND_MAP_VALUE:
                put(p, "{", 1);
                for (size_t i = 0; i < v->map_value->n_entries && !p->cut; i++) {
                        if (i)
                                put(p, ",", 1);
                        put_quoted(p, v->map_value->entries[i]->key);
                        put(p, ":", 1);
                        put_value(p, v->map_value->entries[i]->value);
                }
                put(p, "}", 1);
                return;
        default:
                put_str(p, "null");
                return;
        }
}

size_t value_preview(const Gadget__Value *v, char *out, size_t len)
{
        struct preview p = { .out = out, .cap = len > sizeof cut_mark ? len - sizeof cut_mark : 0 };
        put_value(&p, v);
        out[p.n] = '\0';
        return p.n;
}

size_t value_preview_text(const char *s, char *out, size_t len)
{
        struct preview p = { .out = out, .cap = len > sizeof cut_mark ? len - sizeof cut_mark : 0 };
        for (const char *c = s; *c && !p.cut; c++) {
                /* A control byte becomes a space: one line for a person. */
                char b = (unsigned char)*c < 0x20 || *c == 0x7f ? ' ' : *c;
                size_t k = 1;
                if (b == *c)
                        while (c[k] && ((unsigned char)c[k] & 0xc0) == 0x80)
                                k++;
                put(&p, b == *c ? c : &b, k);
                c += k - 1;
        }
        out[p.n] = '\0';
        return p.n;
}
