/* keys: private to the policy module. policy.c reads the file line by line
 * and tracks sections; keys.c knows the [Gadget] keys and the checks every
 * key shares; binding.c knows the [Binding NAME] keys. */
#pragma once

#include "policy.h"

#include <sys/stat.h>

#define POLICY_N_GADGET_KEYS 40
#define POLICY_KEY_NAME 0 /* index of Name= in gadget_seen */
#define POLICY_KEY_EXEC 1
#define POLICY_QUOTE_MAX 96

enum policy_section {
        POLICY_SECT_NONE,    /* before the first section header */
        POLICY_SECT_GADGET,
        POLICY_SECT_BINDING, /* the last of p->bindings */
        POLICY_SECT_SKIP,    /* a bad or duplicate header: its keys are ignored */
};

enum policy_kind {
        KIND_CUSTOM,    /* set reads it; printed by hand (format.c's [Gadget] keys) */
        KIND_BOOL,
        KIND_SIZE,
        KIND_COUNT,
        KIND_DURATION,
        /* Custom keys (set reads them) that format.c prints from their field: */
        KIND_TEXT,      /* a char * at off, printed unless NULL */
        KIND_WORDS,     /* a char ** at off, its size_t count at max; printed
                         * unless empty: one line, or one a word if KEY_REPEAT */
};

#define KEY_REPEAT   0x1u /* may be given again; the values accumulate */
#define KEY_INFINITY 0x2u /* accepts "infinity" (a duration stores it as 0) */
#define KEY_EMPTY_OK 0x4u /* may be empty */

struct policy_ctx;

typedef int policy_set_fn(struct policy_ctx *c, void *obj, const char *key, const char *value);

/* One key: generic kinds store into the field at off of the policy or the
 * binding; custom ones call set. Generic numbers must be at least 1; def is
 * a number's default (0: none, the field stays 0). format.c prints each
 * binding key from its field as its kind says. */
struct policy_key {
        const char *name;
        enum policy_kind kind;
        unsigned flags;
        unsigned types;  /* binding keys: the types that take the key */
        size_t off;
        uint64_t max;    /* KIND_COUNT: largest value, 0 = no bound; KIND_WORDS: the offset of the count */
        policy_set_fn *set;
        uint64_t def;
};

/* A binding key kept until its section ends, when Type= is known. */
struct policy_pending {
        const struct policy_key *key;
        char *value;
        unsigned line;
};

/* The state of one parse; errors are reported at ->line. */
struct policy_ctx {
        const char *name;
        const char *text;
        size_t len, pos;
        unsigned line;
        struct policy *p;
        struct policy_errors *errs;
        size_t n_errors;
        bool oom, stop;
        bool redact;                                 /* POLICY_REDACT: no text of the file in messages */
        enum policy_section sect;
        unsigned gadget_line;                        /* first [Gadget], 0 = none */
        unsigned gadget_seen[POLICY_N_GADGET_KEYS];  /* line each key was given on */
        struct policy_pending *pend;
        size_t n_pend;
};

void policy_err(struct policy_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Notes key=value of the current section in c->p->written (changes.c). */
void policy_written_add(struct policy_ctx *c, const char *key, const char *value);
void policy_written_free(struct policy *p);
/* A note for p->warnings: the file loads, but something in it is ignored. */
void policy_warn(struct policy_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Notes an allocation failure: the parse stops and returns -ENOMEM. */
void policy_oom(struct policy_ctx *c);
/* Appends "PREFIX: MESSAGE" to errs (which may be NULL); -ENOMEM. */
int policy_errors_add(struct policy_errors *errs, const char *prefix, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* s in double quotes, escaped and shortened to fit size: for messages. */
const char *policy_quote(char *buf, size_t size, const char *s);
#define POLICY_Q(s) policy_quote((char[POLICY_QUOTE_MAX]){ 0 }, POLICY_QUOTE_MAX, (s))

bool policy_strv_has(char *const *v, size_t n, const char *s);
/* The index of VALUE among the N words NAMES, or -EINVAL reported as
 * KEY=VALUE is not one of them. */
int policy_enum(struct policy_ctx *c, const char *key, const char *value, const char *const *names,
                size_t n);
/* An absolute path without "..", normalised, that exists (stat into *st). */
int policy_path(struct policy_ctx *c, const char *key, const char *value, char **out,
                struct stat *st);
/* policy_path, and the path must name a regular file (gadgetd reads or
 * execs it; a FIFO or device could block it or never end). */
int policy_regular_file(struct policy_ctx *c, const char *key, const char *value, char **out,
                        struct stat *st);
/* value split by policy_split_words, bad quoting reported. */
int policy_words(struct policy_ctx *c, const char *key, const char *value, char ***w, size_t *n);
/* Whether one word of a list key's value is acceptable. */
typedef bool policy_word_ok_fn(const char *word);
/* value split into words, each accepted by ok and at most once; a word ok
 * refuses is reported as "KEY=VALUE: WORD is not WHAT", a repeated one as
 * "KEY=VALUE lists WORD twice". */
int policy_checked_words(struct policy_ctx *c, const char *key, const char *value, policy_word_ok_fn *ok,
                         const char *what, char ***w, size_t *n);
/* value split into method names (gadget_identifier_ok), or into HTTP
 * methods if http, each at most once; problems reported. */
int policy_method_words(struct policy_ctx *c, const char *key, const char *value, bool http, char ***w,
                        size_t *n);
/* The entry for key in table t of n, or NULL reported as unknown in where. */
const struct policy_key *policy_key_find(struct policy_ctx *c, const struct policy_key *t,
                                         size_t n, const char *key, const char *where);
/* Stores value into obj (the policy or a binding) as k says. */
void policy_apply(struct policy_ctx *c, void *obj, const struct policy_key *k, const char *value);

void policy_gadget_key(struct policy_ctx *c, const char *key, const char *value);
/* Sets the default (def) of each of the n keys t into obj: a policy's with
 * policy_gadget_keys, a binding's with its own. */
void policy_key_defaults(void *obj, const struct policy_key *t, size_t n);
/* Sets the defaults of the [Gadget] keys of the table into p. */
void policy_gadget_defaults(struct policy *p);
/* The checks of [Gadget] keys that need all of them. */
void policy_gadget_end(struct policy_ctx *c);
void policy_binding_key(struct policy_ctx *c, const char *key, const char *value);
/* The [Binding NAME] keys but Type=, in the order format.c prints them; *n of them. */
const struct policy_key *policy_binding_key_table(size_t *n);
/* Checks the binding just read against its Type=; called when its section ends. */
void policy_binding_end(struct policy_ctx *c);
/* Opens [Binding NAME]: a new binding with its defaults, unless the name is
 * bad or taken (reported; POLICY_SECT_SKIP). */
enum policy_section policy_binding_begin(struct policy_ctx *c, const char *name);
/* Frees what a binding holds (not the binding itself). */
void policy_binding_clear(struct policy_binding *b);
void policy_pending_clear(struct policy_ctx *c);

/* schedule.c: Schedule= (a policy_set_fn), its checks once [Gadget] has
 * ended, and freeing n schedules. */
int policy_set_schedule(struct policy_ctx *c, void *obj, const char *key, const char *value);
void policy_schedules_check(struct policy_ctx *c);
void policy_schedules_free(struct policy_schedule *s, size_t n);
