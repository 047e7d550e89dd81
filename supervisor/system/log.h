/* log: gadgetd's one log module. Every line names the gadget it is about;
 * untrusted text is quoted and escaped before it is written. Under journald
 * (stderr is the stream JOURNAL_STREAM names) each line is a structured
 * entry with PRIORITY= and GADGET=; elsewhere a plain line on stderr. */
#pragma once

#include <stddef.h>

enum log_level { L_ERR = 3, L_WARN = 4, L_INFO = 6, L_DEBUG = 7 };

/* Lines less important than level are not written (default L_DEBUG: all). */
void log_set_level(enum log_level level);

/* Writes one line to stderr: "gadgetd: [GADGET] message", or a journal
 * entry "[GADGET] message" with GADGET=. gadget may be NULL for lines
 * about gadgetd itself. */
void log_msg(enum log_level level, const char *gadget, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* One field of a structured entry: NAME=value in the journal (value NULL:
 * left out). */
struct log_field {
        const char *name;
        const char *value;
};
/* A line with fields of its own: under journald one entry "[GADGET] line"
 * with GADGET=, message_id (a MESSAGE_ID=... field, or NULL) and the
 * fields; else the line on stderr as log_msg writes it. */
void log_fields(enum log_level level, const char *gadget, const char *message_id, const struct log_field *f,
                size_t n, const char *line);
/* Copies len bytes of untrusted text into out as a printable, quoted
 * string (non-printable bytes and invalid UTF-8 as \xNN). Returns out. */
char *log_escape(const char *in, size_t len, char *out, size_t outlen);
