/* kvpg_job: a kv job as one PostgreSQL query (its parameters) and its
 * outcome from the query's results (pure libpq calls, no I/O). */
#pragma once

#include <stdint.h>
#include <libpq-fe.h>

struct kv_job;

/* Sends job's query on c (prepared at connect: kvpg_query_names; results
 * in binary), a write with the writer's epoch (the gadget's lease). 1 if
 * sent, 0 if libpq refused it (the connection is broken). */
int kvpg_job_send(PGconn *c, const struct kv_job *job, const char *node, int64_t epoch);
/* Fills job's outcome from its query's last result res (a tuples result).
 * Sets job->err. */
void kvpg_job_result(struct kv_job *job, const PGresult *res);
