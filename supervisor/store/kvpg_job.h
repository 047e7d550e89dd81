/* kvpg_job: a job as one PostgreSQL query (its parameters) and its outcome
 * from the query's results (pure libpq calls, no I/O), by the type of
 * binding it is for: each type's queries, parameters and results are its
 * own file's (kvpg_job.c: kv, kvpg_alarm.c: alarm), and the helpers here
 * are theirs to share. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <libpq-fe.h>

#include "kv_job.h"

/* A query's parameters, added in order (text, or binary of a length), and
 * room for those the query's type makes. */
struct kvpg_params {
        const char *v[8];
        int l[8], f[8], n;
        char ep[8];                   /* the writer's epoch, a binary bigint */
        char texts[4][24];            /* numbers as text or binary */
        uint8_t end[KV_MAX_KEY + 1];  /* a list's range end */
};

void kvpg_param_text(struct kvpg_params *p, const char *s);
void kvpg_param_bin(struct kvpg_params *p, const void *b, size_t len);
/* v as a binary bigint parameter (8 bytes, most significant first):
 * neither side formats or parses a number. */
void kvpg_int8_be(uint64_t v, char out[8]);
/* A quota as a bigint parameter: "no limit" is the largest bigint. */
void kvpg_quota_param(uint64_t v, char out[8]);
/* The one int4 or bool a write function returned: 0 or -EIO. */
int kvpg_scalar(const PGresult *res, int64_t *out);
/* A big-endian integer of n bytes (int4, int8 in binary). */
int64_t kvpg_be(const char *p, int n);

/* A type of binding's half on the PostgreSQL store (kvpg_TYPE.c, struct
 * kv_type's pg); its tables are a migration of kvpg_sql.c. */
struct kvpg_type {
        const char *const *queries;   /* parameterised, results in binary */
        const char *const *names;     /* the name each is prepared under */
        size_t n_queries;
        const char *const *ops;       /* the names of the operations it carries out */
        size_t n_ops;
        /* Adds the parameters of job, its operation ops[op], after $1
         * gadget, $2 binding (p->ep holds the writer's epoch): the index
         * of its query. */
        int (*params)(struct kvpg_params *p, const struct kv_job *job, int op, const char *node);
        /* Fills job's outcome from its query's result: 0 or -errno. */
        int (*result)(struct kv_job *job, const PGresult *res, int op);
};

/* Whether each of the n types' PostgreSQL half carries out each of its
 * operations; if not, why. */
bool kvpg_job_types_ok(const struct kv_type *const *types, size_t n, char *why, size_t len);
/* How many queries the n types have between them (each connection
 * prepares them all at connect), and query i's name and text. */
size_t kvpg_job_n_queries(const struct kv_type *const *types, size_t n);
void kvpg_job_query(const struct kv_type *const *types, size_t n, size_t i, const char **name, const char **sql);
/* Sends job's query on c (results in binary), a write with the writer's
 * epoch (the gadget's lease). 1 if sent, 0 if libpq refused it (the
 * connection is broken). */
int kvpg_job_send(PGconn *c, const struct kv_job *job, const char *node, int64_t epoch);
/* Fills job's outcome from its query's last result res (a tuples result).
 * Sets job->err. */
void kvpg_job_result(struct kv_job *job, const PGresult *res);
