/* pq_dl: libpq, loaded when gadgetd opens a PostgreSQL store.
 *
 * The functions below carry libpq's own names and forward to the loaded
 * library; they are hidden, so nothing but gadgetd's own code binds to
 * them. Every one is reached only after pq_dl_load succeeded (kvpg_new
 * fails otherwise, and no connection exists to pass them). The table is
 * this process's one copy of libpq's entry points, as the dynamic
 * linker's would be, filled once on the loop and never changed after. */
#include "pq_dl.h"

#include <errno.h>

#include "dl.h"

#define HIDDEN __attribute__((visibility("hidden")))

static struct {
        void *lib;
        PGconn *(*connect_start)(const char *);
        PGconn *(*connect_start_params)(const char *const *, const char *const *, int);
        PostgresPollingStatusType (*connect_poll)(PGconn *);
        ConnStatusType (*status)(const PGconn *);
        int (*socket)(const PGconn *);
        char *(*error_message)(const PGconn *);
        char *(*host)(const PGconn *);
        char *(*port)(const PGconn *);
        void (*finish)(PGconn *);
        int (*set_nonblocking)(PGconn *, int);
        int (*send_query)(PGconn *, const char *);
        int (*send_query_params)(PGconn *, const char *, int, const Oid *, const char *const *, const int *,
                                 const int *, int);
        int (*consume_input)(PGconn *);
        int (*is_busy)(PGconn *);
        PGresult *(*get_result)(PGconn *);
        ExecStatusType (*result_status)(const PGresult *);
        char *(*result_error_field)(const PGresult *, int);
        char *(*result_error_message)(const PGresult *);
        int (*ntuples)(const PGresult *);
        int (*nfields)(const PGresult *);
        char *(*getvalue)(const PGresult *, int, int);
        int (*getlength)(const PGresult *, int, int);
        int (*getisnull)(const PGresult *, int, int);
        void (*clear)(PGresult *);
        int (*flush)(PGconn *);
        int (*send_prepare)(PGconn *, const char *, const char *, int, const Oid *);
        int (*send_query_prepared)(PGconn *, const char *, int, const char *const *, const int *, const int *, int);
        PQnoticeProcessor (*set_notice_processor)(PGconn *, PQnoticeProcessor, void *);
        PQconninfoOption *(*conninfo_parse)(const char *, char **);
        void (*conninfo_free)(PQconninfoOption *);
        void (*freemem)(void *);
        PGnotify *(*notifies)(PGconn *);
} fn;

int pq_dl_load(char *err, size_t errlen)
{
        static const struct dl_sym syms[] = {
                { (void **)&fn.connect_start, "PQconnectStart" },
                { (void **)&fn.connect_start_params, "PQconnectStartParams" },
                { (void **)&fn.connect_poll, "PQconnectPoll" },
                { (void **)&fn.status, "PQstatus" },
                { (void **)&fn.socket, "PQsocket" },
                { (void **)&fn.error_message, "PQerrorMessage" },
                { (void **)&fn.host, "PQhost" },
                { (void **)&fn.port, "PQport" },
                { (void **)&fn.finish, "PQfinish" },
                { (void **)&fn.set_nonblocking, "PQsetnonblocking" },
                { (void **)&fn.send_query, "PQsendQuery" },
                { (void **)&fn.send_query_params, "PQsendQueryParams" },
                { (void **)&fn.consume_input, "PQconsumeInput" },
                { (void **)&fn.is_busy, "PQisBusy" },
                { (void **)&fn.get_result, "PQgetResult" },
                { (void **)&fn.result_status, "PQresultStatus" },
                { (void **)&fn.result_error_field, "PQresultErrorField" },
                { (void **)&fn.result_error_message, "PQresultErrorMessage" },
                { (void **)&fn.ntuples, "PQntuples" },
                { (void **)&fn.nfields, "PQnfields" },
                { (void **)&fn.getvalue, "PQgetvalue" },
                { (void **)&fn.getlength, "PQgetlength" },
                { (void **)&fn.getisnull, "PQgetisnull" },
                { (void **)&fn.clear, "PQclear" },
                { (void **)&fn.flush, "PQflush" },
                { (void **)&fn.send_prepare, "PQsendPrepare" },
                { (void **)&fn.send_query_prepared, "PQsendQueryPrepared" },
                { (void **)&fn.set_notice_processor, "PQsetNoticeProcessor" },
                { (void **)&fn.conninfo_parse, "PQconninfoParse" },
                { (void **)&fn.conninfo_free, "PQconninfoFree" },
                { (void **)&fn.freemem, "PQfreemem" },
                { (void **)&fn.notifies, "PQnotifies" },
        };
        if (fn.lib)
                return 0;
        void *lib = dl_load(PQ_DL_SONAME, syms, sizeof syms / sizeof *syms, err, errlen);
        if (!lib)
                return -ENOENT;
        fn.lib = lib;
        return 0;
}

HIDDEN PGconn *PQconnectStart(const char *conninfo) { return fn.connect_start(conninfo); }
HIDDEN PGconn *PQconnectStartParams(const char *const *keys, const char *const *values, int expand)
{
        return fn.connect_start_params(keys, values, expand);
}
HIDDEN PostgresPollingStatusType PQconnectPoll(PGconn *c) { return fn.connect_poll(c); }
HIDDEN ConnStatusType PQstatus(const PGconn *c) { return fn.status(c); }
HIDDEN int PQsocket(const PGconn *c) { return fn.socket(c); }
HIDDEN char *PQerrorMessage(const PGconn *c) { return fn.error_message(c); }
HIDDEN char *PQhost(const PGconn *c) { return fn.host(c); }
HIDDEN char *PQport(const PGconn *c) { return fn.port(c); }
/* NULL is a no-op, as in libpq, without looking at the table. */
HIDDEN void PQfinish(PGconn *c)
{
        if (c)
                fn.finish(c);
}
HIDDEN int PQsetnonblocking(PGconn *c, int arg) { return fn.set_nonblocking(c, arg); }
HIDDEN int PQsendQuery(PGconn *c, const char *q) { return fn.send_query(c, q); }

HIDDEN int PQsendQueryParams(PGconn *c, const char *q, int n, const Oid *types, const char *const *values,
                             const int *lengths, const int *formats, int result_format)
{
        return fn.send_query_params(c, q, n, types, values, lengths, formats, result_format);
}

HIDDEN int PQconsumeInput(PGconn *c) { return fn.consume_input(c); }
HIDDEN int PQisBusy(PGconn *c) { return fn.is_busy(c); }
HIDDEN PGresult *PQgetResult(PGconn *c) { return fn.get_result(c); }
HIDDEN ExecStatusType PQresultStatus(const PGresult *r) { return fn.result_status(r); }
HIDDEN char *PQresultErrorField(const PGresult *r, int code) { return fn.result_error_field(r, code); }
HIDDEN char *PQresultErrorMessage(const PGresult *r) { return fn.result_error_message(r); }
HIDDEN int PQntuples(const PGresult *r) { return fn.ntuples(r); }
HIDDEN int PQnfields(const PGresult *r) { return fn.nfields(r); }
HIDDEN char *PQgetvalue(const PGresult *r, int row, int col) { return fn.getvalue(r, row, col); }
HIDDEN int PQgetlength(const PGresult *r, int row, int col) { return fn.getlength(r, row, col); }
HIDDEN int PQgetisnull(const PGresult *r, int row, int col) { return fn.getisnull(r, row, col); }
HIDDEN void PQclear(PGresult *r)
{
        if (r)
                fn.clear(r);
}
HIDDEN int PQflush(PGconn *c) { return fn.flush(c); }

HIDDEN PQconninfoOption *PQconninfoParse(const char *s, char **err) { return fn.conninfo_parse(s, err); }
HIDDEN void PQconninfoFree(PQconninfoOption *o) { fn.conninfo_free(o); }
HIDDEN void PQfreemem(void *p) { fn.freemem(p); }
HIDDEN PGnotify *PQnotifies(PGconn *c) { return fn.notifies(c); }

HIDDEN int PQsendPrepare(PGconn *c, const char *name, const char *q, int n, const Oid *types)
{
        return fn.send_prepare(c, name, q, n, types);
}

HIDDEN int PQsendQueryPrepared(PGconn *c, const char *name, int n, const char *const *values, const int *lengths,
                               const int *formats, int result_format)
{
        return fn.send_query_prepared(c, name, n, values, lengths, formats, result_format);
}

HIDDEN PQnoticeProcessor PQsetNoticeProcessor(PGconn *c, PQnoticeProcessor proc, void *arg)
{
        return fn.set_notice_processor(c, proc, arg);
}
