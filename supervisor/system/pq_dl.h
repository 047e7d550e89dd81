/* pq_dl: libpq loaded when gadgetd opens a PostgreSQL store (Store=
 * postgresql), not at its start: a gadgetd whose store is SQLite starts and
 * runs on a host without libpq. Code that uses libpq calls pq_dl_load
 * first (kvpg_new does), then libpq's functions by their usual names. */
#pragma once

#include <stddef.h>
#include <libpq-fe.h>

#define PQ_DL_SONAME "libpq.so.5"

/* Loads libpq once per process; later calls return 0 at once. 0, or
 * -ENOENT with err saying why. Called on the loop only. */
int pq_dl_load(char *err, size_t errlen);
