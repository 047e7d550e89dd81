/* log: gadgetd's one log module. Every line names the gadget it is about;
 * untrusted text is quoted and escaped before it is written. */
#pragma once

#include <stddef.h>

enum log_level { L_ERR = 3, L_WARN = 4, L_INFO = 6, L_DEBUG = 7 };

/* Lines less important than level are not written (default L_DEBUG: all). */
void log_set_level(enum log_level level);
/* Writes one line to stderr: "gadgetd: [GADGET] message". gadget may be
 * NULL for lines about gadgetd itself. */
void log_msg(enum log_level level, const char *gadget, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* Copies len bytes of untrusted text into out as a printable, quoted
 * string (non-printable bytes and invalid UTF-8 as \xNN). Returns out. */
char *log_escape(const char *in, size_t len, char *out, size_t outlen);
