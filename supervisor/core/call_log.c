/* call_log: a gadget's recent calls (call_log.h). */
#include "call_log.h"

#include <stdlib.h>
#include <string.h>

void call_log_add(struct call_log **log, const char *method, int code, uint64_t duration_us, uint64_t end_ms,
                  const uint8_t *trace)
{
        struct call_log *l = *log;
        if (!l && !(l = *log = calloc(1, sizeof *l)))
                return;
        struct call_log_entry *e = &l->e[l->next];
        size_t len = strnlen(method, GADGET_NAME_MAX);
        memcpy(e->method, method, len);
        e->method[len] = '\0';
        e->code = code > 0 && code <= UINT8_MAX ? (uint8_t)code : code ? GADGET_EFAILED : 0;
        e->duration_us = duration_us;
        e->end_ms = end_ms;
        if (trace)
                memcpy(e->trace_id, trace, TRACE_ID_LEN);
        else
                memset(e->trace_id, 0, TRACE_ID_LEN);
        l->next = (l->next + 1) % CALL_LOG_MAX;
        if (l->n < CALL_LOG_MAX)
                l->n++;
}

const struct call_log_entry *call_log_get(const struct call_log *log, size_t i)
{
        if (!log || i >= log->n)
                return NULL;
        return &log->e[(log->next + CALL_LOG_MAX - 1 - i) % CALL_LOG_MAX];
}
