/* log: gadgetd's one log module. Every line names the gadget it is about;
 * untrusted text is quoted and escaped before it is written. Under journald
 * (stderr is the stream JOURNAL_STREAM names) each line is a structured
 * entry with PRIORITY= and GADGET=; elsewhere a plain line on stderr. */
#pragma once

#include <stddef.h>

enum log_level { L_ERR = 3, L_WARN = 4, L_INFO = 6, L_DEBUG = 7 };

/* Lines less important than level are not written (default L_DEBUG: all). */
void log_set_level(enum log_level level);
struct audit_record;

/* Writes one line to stderr: "gadgetd: [GADGET] message", or a journal
 * entry "[GADGET] message" with GADGET=. gadget may be NULL for lines
 * about gadgetd itself. */
void log_msg(enum log_level level, const char *gadget, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* One audit record, line being its JSON text: "[GADGET] audit LINE", and
 * under journald the fields GADGET, BINDING, OP, OUTCOME, BYTES,
 * DURATION_US, DETAIL and the audit MESSAGE_ID. */
void log_audit(enum log_level level, const struct audit_record *r, const char *line);
/* Copies len bytes of untrusted text into out as a printable, quoted
 * string (non-printable bytes and invalid UTF-8 as \xNN). Returns out. */
char *log_escape(const char *in, size_t len, char *out, size_t outlen);
