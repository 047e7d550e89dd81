/* casefile: `gadgetd test`'s file of calls, answers wanted and canned
 * binding answers (casefile.h has the format). Only read and checked
 * here: nothing of it runs. The file is the tester's own; it is still
 * read within bounds (lines of CASEFILE_LINE_MAX, values through
 * json_to_value's limits). */
#include "casefile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract.h"
#include "json.h"
#include "value.h"

#define CASEFILE_LINE_MAX 65536
#define CASEFILE_MAX 10000    /* calls, and fakes */

int casefile_code(const char *s)
{
        char *end;
        long n = strtol(s, &end, 10);
        if (*s && !*end)
                return n >= 1 && n <= GADGET_EINTERNAL ? (int)n : -1;
        for (int c = 1; c <= GADGET_EINTERNAL; c++)
                if (strcmp(s, gadget_error_name((unsigned)c)) == 0)
                        return c;
        return -1;
}

void casefile_free(struct casefile *cf)
{
        for (size_t i = 0; i < cf->n_calls; i++) {
                free(cf->calls[i].method);
                value_free(cf->calls[i].args);
                value_free(cf->calls[i].expect);
                free(cf->calls[i].expect_json);
        }
        for (size_t i = 0; i < cf->n_fakes; i++) {
                free(cf->fakes[i].binding);
                free(cf->fakes[i].op);
                value_free(cf->fakes[i].value);
                free(cf->fakes[i].message);
        }
        free(cf->calls);
        free(cf->fakes);
        free(cf->policy);
        *cf = (struct casefile){ 0 };
}

struct case_fake *casefile_fake(struct casefile *cf, const char *binding, const char *op)
{
        struct case_fake *last = NULL;
        for (size_t i = 0; i < cf->n_fakes; i++) {
                struct case_fake *f = &cf->fakes[i];
                if (strcmp(f->binding, binding) != 0 || strcmp(f->op, op) != 0)
                        continue;
                if (!f->used) {
                        f->used = true;
                        return f;
                }
                last = f;
        }
        return last;
}

/* The next word of *s (spaces between), NUL-ended in place; NULL if none. */
static char *word(char **s)
{
        char *p = *s + strspn(*s, " \t");
        if (!*p)
                return NULL;
        char *end = p + strcspn(p, " \t");
        *s = *end ? end + 1 : end;
        *end = '\0';
        return p;
}

static char *rest(char *s)
{
        return s + strspn(s, " \t");
}

/* JSON text (empty: null) as a value. 0 or -1 with why. */
static int value_of(const char *text, Gadget__Value **v, char *why, size_t len)
{
        if (!*text)
                return (*v = value_new_null()) ? 0 : (snprintf(why, len, "out of memory"), -1);
        return json_to_value(text, strlen(text), v, why, len) < 0 ? -1 : 0;
}

/* One line, its words parsed. 0 or -1 with why. */
static int take_line(struct casefile *cf, const char *dir, unsigned n, char *s, char *why, size_t len)
{
        char *kw = word(&s);
        if (!kw || *kw == '#')
                return 0;
        struct case_call *last = cf->n_calls ? &cf->calls[cf->n_calls - 1] : NULL;
        bool open = last && !last->expect && !last->code;
        if (strcmp(kw, "policy") == 0) {
                char *file = rest(s);
                if (cf->policy || !*file)
                        return snprintf(why, len, cf->policy ? "policy given twice" : "policy needs a FILE"), -1;
                return asprintf(&cf->policy, "%s%s%s", *file == '/' ? "" : dir, *file == '/' ? "" : "/", file) < 0
                               ? (cf->policy = NULL, snprintf(why, len, "out of memory"), -1)
                               : 0;
        }
        if (strcmp(kw, "call") == 0) {
                if (open)
                        return snprintf(why, len, "the call of line %u has no expect or error line", last->line), -1;
                char *method = word(&s);
                if (!method || !gadget_method_name_ok(method))
                        return snprintf(why, len, "call needs a METHOD name"), -1;
                if (cf->n_calls >= CASEFILE_MAX)
                        return snprintf(why, len, "more than %d calls", CASEFILE_MAX), -1;
                struct case_call *c = realloc(cf->calls, (cf->n_calls + 1) * sizeof *c);
                if (!c)
                        return snprintf(why, len, "out of memory"), -1;
                cf->calls = c;
                c = &c[cf->n_calls];
                *c = (struct case_call){ .line = n };
                char jwhy[200];
                if (!(c->method = strdup(method)) || value_of(rest(s), &c->args, jwhy, sizeof jwhy) < 0) {
                        free(c->method);
                        return snprintf(why, len, "call %s: bad JSON arguments: %s", method, jwhy), -1;
                }
                cf->n_calls++;
                return 0;
        }
        if (strcmp(kw, "expect") == 0 || strcmp(kw, "error") == 0) {
                if (!open)
                        return snprintf(why, len, "%s with no call before it", kw), -1;
                char jwhy[200];
                if (*kw == 'e' && kw[1] == 'x') {
                        if (value_of(rest(s), &last->expect, jwhy, sizeof jwhy) < 0)
                                return snprintf(why, len, "expect: bad JSON: %s", jwhy), -1;
                        if (!(last->expect_json = strdup(*rest(s) ? rest(s) : "null")))
                                return snprintf(why, len, "out of memory"), -1;
                        return 0;
                }
                char *code = word(&s);
                if (!code || (last->code = casefile_code(code)) < 0) {
                        last->code = 0;
                        return snprintf(why, len, "error needs a CODE: a name (not_found) or 1 to %d", GADGET_EINTERNAL),
                               -1;
                }
                return 0;
        }
        if (strcmp(kw, "fake") == 0) {
                char *binding = word(&s), *op = binding ? word(&s) : NULL;
                if (!op)
                        return snprintf(why, len, "fake needs BINDING OP and an answer"), -1;
                if (cf->n_fakes >= CASEFILE_MAX)
                        return snprintf(why, len, "more than %d fakes", CASEFILE_MAX), -1;
                struct case_fake *f = realloc(cf->fakes, (cf->n_fakes + 1) * sizeof *f);
                if (!f)
                        return snprintf(why, len, "out of memory"), -1;
                cf->fakes = f;
                f = &f[cf->n_fakes++];
                *f = (struct case_fake){ .line = n, .binding = strdup(binding), .op = strdup(op) };
                if (!f->binding || !f->op)
                        return snprintf(why, len, "out of memory"), -1;
                char *answer = rest(s), jwhy[200];
                if (strncmp(answer, "error", 5) == 0 && (answer[5] == ' ' || answer[5] == '\t' || !answer[5])) {
                        answer += 5;
                        char *code = word(&answer);
                        if (!code || (f->code = casefile_code(code)) < 0)
                                return snprintf(why, len, "fake error needs a CODE: a name (not_found) or 1 to %d",
                                                GADGET_EINTERNAL), -1;
                        if (!(f->message = strdup(*rest(answer) ? rest(answer) : gadget_error_text((unsigned)f->code))))
                                return snprintf(why, len, "out of memory"), -1;
                        return 0;
                }
                if (!*answer || value_of(answer, &f->value, jwhy, sizeof jwhy) < 0)
                        return snprintf(why, len, "fake %s %s: bad JSON answer: %s", binding, op,
                                        *answer ? jwhy : "none"), -1;
                return 0;
        }
        return snprintf(why, len, "unknown line \"%s\": policy, call, expect, error or fake", kw), -1;
}

int casefile_read(const char *path, struct casefile *cf, char *err, size_t len)
{
        *cf = (struct casefile){ 0 };
        FILE *f = fopen(path, "re");
        if (!f) {
                snprintf(err, len, "%s: %s", path, strerror(errno));
                return -1;
        }
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash)
                *(slash == dir ? slash + 1 : slash) = '\0';
        else
                snprintf(dir, sizeof dir, ".");
        char *line = malloc(CASEFILE_LINE_MAX + 2), why[300] = "";
        unsigned n = 0;
        int e = line ? 0 : -1;
        if (!line)
                snprintf(why, sizeof why, "out of memory");
        while (e == 0 && fgets(line, CASEFILE_LINE_MAX + 2, f)) {
                n++;
                size_t l = strlen(line);
                if (l && line[l - 1] == '\n')
                        line[--l] = '\0';
                else if (!feof(f)) {
                        snprintf(why, sizeof why, "line longer than %d bytes", CASEFILE_LINE_MAX);
                        e = -1;
                        break;
                }
                if (l && line[l - 1] == '\r')
                        line[--l] = '\0';
                e = take_line(cf, dir, n, line, why, sizeof why);
        }
        free(line);
        fclose(f);
        struct case_call *last = cf->n_calls ? &cf->calls[cf->n_calls - 1] : NULL;
        if (e == 0 && last && !last->expect && !last->code) {
                n = last->line;
                snprintf(why, sizeof why, "the call has no expect or error line");
                e = -1;
        }
        if (e == 0 && !cf->policy) {
                snprintf(why, sizeof why, "no policy line");
                e = -1;
        }
        if (e < 0) {
                snprintf(err, len, "%s:%u: %s", path, n, why);
                casefile_free(cf);
        }
        return e;
}

bool casefile_equal(const Gadget__Value *a, const Gadget__Value *b)
{
        if (a->kind_case == GADGET__VALUE__KIND_INT_VALUE && b->kind_case == GADGET__VALUE__KIND_DOUBLE_VALUE)
                return (double)a->int_value == b->double_value;
        if (a->kind_case == GADGET__VALUE__KIND_DOUBLE_VALUE && b->kind_case == GADGET__VALUE__KIND_INT_VALUE)
                return casefile_equal(b, a);
        if (a->kind_case != b->kind_case)
                return false;
        switch (a->kind_case) {
        case GADGET__VALUE__KIND_BOOL_VALUE: return a->bool_value == b->bool_value;
        case GADGET__VALUE__KIND_INT_VALUE: return a->int_value == b->int_value;
        case GADGET__VALUE__KIND_DOUBLE_VALUE: return a->double_value == b->double_value;
        case GADGET__VALUE__KIND_STRING_VALUE: return strcmp(a->string_value, b->string_value) == 0;
        case GADGET__VALUE__KIND_BYTES_VALUE:
                return a->bytes_value.len == b->bytes_value.len &&
                       (!a->bytes_value.len || memcmp(a->bytes_value.data, b->bytes_value.data, a->bytes_value.len) == 0);
        case GADGET__VALUE__KIND_LIST_VALUE: {
                const Gadget__List *x = a->list_value, *y = b->list_value;
                size_t nx = x ? x->n_items : 0, ny = y ? y->n_items : 0;
                if (nx != ny)
                        return false;
                for (size_t i = 0; i < nx; i++)
                        if (!casefile_equal(x->items[i], y->items[i]))
                                return false;
                return true;
        }
        case GADGET__VALUE__KIND_MAP_VALUE: {
                /* Keys are unique within a map: same size, and each of a's
                 * keys in b with an equal value. */
                const Gadget__Map *x = a->map_value, *y = b->map_value;
                size_t nx = x ? x->n_entries : 0, ny = y ? y->n_entries : 0;
                if (nx != ny)
                        return false;
                for (size_t i = 0; i < nx; i++) {
                        const Gadget__Value *w = value_map_get(b, x->entries[i]->key);
                        if (!w || !x->entries[i]->value || !casefile_equal(x->entries[i]->value, w))
                                return false;
                }
                return true;
        }
        default: return true; /* null */
        }
}
