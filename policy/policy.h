/* policy: the policy-file format (systemd-style INI, parsed with libinih)
 * into a typed, fully validated struct. Pure code apart from stat() of the
 * paths a policy names. */
#pragma once

#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define POLICY_UNLIMITED UINT64_MAX
#define POLICY_UI_MAX (1024 * 1024) /* largest UI= file gadgetd serves */
#define POLICY_MEMORY_MIN (1u << 20)  /* smallest MemoryMax= */
/* kv defaults, for a stranger's gadget on a shared host: a few MiB of
 * data. */
#define POLICY_KV_MAX_KEYS 100000
#define POLICY_KV_MAX_BYTES (16u * 1024u * 1024u)

/* An http binding's answer travels in one frame (wire.h's WIRE_MAX_FRAME):
 * the body, each header with at most POLICY_HTTP_HEADER_OVERHEAD bytes of
 * encoding beyond the header line's own, and POLICY_HTTP_ENVELOPE for the
 * rest (ids, status, the map around them). */
#define POLICY_HTTP_ENVELOPE (4u << 10)
#define POLICY_HTTP_HEADER_OVERHEAD 16u
#define POLICY_HTTP_MAX_HEADERS 1000u       /* largest MaxResponseHeaders= */
#define POLICY_HTTP_MAX_HEADER_BYTES (256u << 10) /* largest MaxResponseHeaderSize= */
/* Defaults of the budgets a gadget's peer has in gadgetd (see gadget.policy(5)). */
#define POLICY_BINDING_CALLS 16         /* CallsMax= of a binding */
#define POLICY_BINDING_CALLS_MAX 64     /* BindingCallsMax= */
#define POLICY_FRAME_VALUES 131072      /* FrameValuesMax= */
#define POLICY_FRAME_VALUES_LIMIT 1048576
#define POLICY_FRAME_VALUES_PER_S (4 * POLICY_FRAME_VALUES) /* FrameValuesPerSecond= */
#define POLICY_FRAME_BYTES_PER_S (64ull << 20) /* FrameBytesPerSecond= */
#define POLICY_TURN_FRAMES 64           /* TurnFramesMax= */
#define POLICY_TURN_BYTES (1024 * 1024) /* TurnBytesMax= */
#define POLICY_CORE_DUMP_MAX (256ull << 20) /* CoreDump=, SANDBOX_CORE_MAX */
#define POLICY_STATE_MAX (1ull << 30)      /* StateMax='s default */
#define POLICY_CALLS_QUEUED 1024        /* CallsQueuedMax= */
#define POLICY_CALLS_QUEUED_LIMIT 65536
#define POLICY_MAX_FILE (1024 * 1024) /* largest policy file */
/* How a policy file is opened: never waiting (a FIFO or a device opens at
 * once and is then refused as not a regular file). Add O_NOFOLLOW where a
 * symlink must not be followed (gadgetd's load requests). */
#define POLICY_OPEN_FLAGS (O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
/* policy_load_fd flags: messages name FILE:LINE and what was wrong, but
 * never show text of the file (keys, values, lines) — for readers who
 * must not learn the file's content through gadgetd. */
#define POLICY_REDACT 0x1u

/* RequireTypes=: must every method of the gadget declare a signature? */
/* Start=: when a loaded gadget starts. */
/* NetworkNamespace=: a network namespace of the gadget's own, or the one
 * empty namespace gadgetd makes once and shares (supervisor/spawn/netns.c;
 * docs/security.md says what that shares and why it is safe). */
enum policy_netns {
        POLICY_NETNS_PRIVATE, /* the default */
        POLICY_NETNS_SHARED,
};

enum policy_start {
        POLICY_START_ALWAYS,    /* at once, and whenever it is loaded or restarted */
        POLICY_START_ON_DEMAND, /* at its first call (or gadgetctl wake) */
};

enum policy_types {
        POLICY_TYPES_DEFAULT = 0, /* as gadgetd says ([Daemon] RequireTypes=) */
        POLICY_TYPES_REQUIRED,
        POLICY_TYPES_OPTIONAL,
};

enum policy_restart {
        POLICY_RESTART_NO,
        POLICY_RESTART_ON_FAILURE,
        POLICY_RESTART_ALWAYS,
};

enum binding_type {
        BINDING_KV,
        BINDING_GADGET,
        BINDING_HTTP,
        BINDING_TEXT,
        BINDING_SECRET,
        BINDING_ALARM,
        BINDING_TAIL,
};

/* An alarm binding's MaxAlarms= and MaxPayloadSize= by default. */
#define POLICY_ALARMS_MAX 1000
#define POLICY_ALARM_PAYLOAD (64u * 1024u)

/* A tail binding's QueueMax= by default and at most, and how many
 * gadgets its Of= may name. */
#define POLICY_TAIL_QUEUE 1024
#define POLICY_TAIL_QUEUE_MAX 65536
#define POLICY_TAIL_OF_MAX 64
/* A tail binding's EventsPerSecond= by default and at most. */
#define POLICY_TAIL_EVENTS_PER_S 10000
#define POLICY_TAIL_EVENTS_PER_S_MAX 1000000

/* A secret file's size: the default cap and the largest MaxSize= (what
 * one reply frame carries with room to spare). */
#define POLICY_SECRET_SIZE (64u * 1024u)
#define POLICY_SECRET_SIZE_MAX (1024u * 1024u)

/* How long a call waits for a person's approval before it is denied
 * (ApproveTimeout=), and the longest one may wait. */
#define POLICY_APPROVE_TIMEOUT_MS (5 * 60 * 1000)
#define POLICY_APPROVE_TIMEOUT_MAX_MS (24 * 60 * 60 * 1000)
/* An http binding's CredentialHeader= by default, and the largest
 * Credential= file (it goes into one header line). */
#define POLICY_CREDENTIAL_HEADER "Authorization: Bearer {}"
#define POLICY_CREDENTIAL_SIZE 4096

/* Schedule=: at most this many per gadget. */
#define POLICY_SCHEDULES_MAX 64

struct calendar;

/* Schedule=METHOD CALENDAR: gadgetd calls METHOD (caller "schedule") when
 * the calendar event elapses (policy/calendar.h). */
struct policy_schedule {
        char *method;            /* a method name (gadget_identifier_ok) */
        char *calendar;          /* text as written */
        struct calendar *cal;    /* parsed */
        unsigned line;           /* line of the Schedule= */
};

/* Every char ** below is NULL-terminated, or NULL when its count is 0. */
struct policy_binding {
        char *name;              /* identifier: [A-Za-z_][A-Za-z0-9_]* */
        enum binding_type type;
        unsigned line;           /* line of the [Binding NAME] header */
        /* kv */
        uint64_t max_value_size; /* MaxValueSize, default 1 MiB */
        uint64_t max_keys;       /* MaxKeys, default POLICY_KV_MAX_KEYS */
        uint64_t max_bytes;      /* MaxBytes, default POLICY_KV_MAX_BYTES */
        /* gadget */
        char *target;            /* Target= */
        char **methods;          /* Methods= (gadget: method allowlist; http: HTTP methods) */
        size_t n_methods;
        /* http */
        char **allow;            /* Allow= URL prefixes */
        size_t n_allow;
        uint64_t timeout_ms;     /* Timeout=, default 10 s */
        uint64_t max_response;   /* MaxResponseSize=, default 1 MiB */
        uint64_t max_request;    /* MaxRequestSize=, default 1 MiB */
        uint64_t max_resp_headers;      /* MaxResponseHeaders=, default 100 */
        uint64_t max_resp_header_bytes; /* MaxResponseHeaderSize=, default 64 KiB */
        char *ca_file;           /* CAFile=: the CAs trusted for HTTPS instead of the system's, or NULL */
        /* http: a credential gadgetd attaches, which the gadget never sees */
        char *credential;        /* Credential=: a file read by gadgetd at each request, or NULL */
        char *credential_header; /* CredentialHeader=: "Name: text with {}"; with Credential= only,
                                  * POLICY_CREDENTIAL_HEADER when not given */
        /* gadget and http: calls that wait for a person's approval */
        char **approve;          /* Approve=: method names (gadget) or HTTP methods (http) */
        size_t n_approve;
        uint64_t approve_timeout_ms; /* ApproveTimeout=, default POLICY_APPROVE_TIMEOUT_MS */
        /* every type */
        uint64_t calls_max;      /* CallsMax=: its calls in flight, default POLICY_BINDING_CALLS */
        /* text */
        char *value;             /* Value= */
        /* secret */
        char *file;              /* File= */
        uint64_t max_size;       /* MaxSize=, default POLICY_SECRET_SIZE, at most POLICY_SECRET_SIZE_MAX */
        /* alarm */
        char *method;            /* Method=: the gadget's method gadgetd calls with each due alarm */
        uint64_t max_alarms;     /* MaxAlarms=, default POLICY_ALARMS_MAX */
        uint64_t max_payload;    /* MaxPayloadSize=, default POLICY_ALARM_PAYLOAD */
        /* tail (Method= too: the gadget's method gadgetd calls with each batch) */
        char **of;               /* Of=: the gadgets whose events it gets */
        size_t n_of;
        uint64_t queue_max;      /* QueueMax=: events waiting, default POLICY_TAIL_QUEUE */
        uint64_t events_per_s;   /* EventsPerSecond=: events delivered, default POLICY_TAIL_EVENTS_PER_S */
};

struct policy {
        char *path;              /* the policy file as given */
        char *name;              /* Name=, required */
        char *exec;              /* Exec=, required, absolute, an existing regular file */
        char **argv;             /* Arguments=, split like a shell (quotes), not including argv[0] */
        size_t argc;
        char **env;              /* Environment= KEY=VALUE items */
        size_t n_env;
        char **ro_paths;         /* ReadOnlyPaths=, absolute, existing */
        size_t n_ro_paths;
        bool system_libraries;   /* SystemLibraries=, default no */
        bool record_denials;     /* RecordDenials=, default yes: the filter's refusals are recorded
                                  * (worker/sandbox/denials.c); no: answered by the kernel alone, and
                                  * the program may have a seccomp listener of its own */
        enum policy_netns netns; /* NetworkNamespace=, default private */
        uint64_t tmp_size;       /* TmpSize=, bytes, default 16M */
        uint64_t core_dump;      /* CoreDump=, bytes of each crash's core kept, 0 = none (the default) */
        uint64_t state_max;      /* StateMax=, bytes of the gadget's state on this host (its kv store's
                                  * files and its kept cores), POLICY_STATE_MAX by default */
        uint64_t memory_max;     /* MemoryMax=, bytes, default POLICY_UNLIMITED */
        uint64_t tasks_max;      /* TasksMax=, default POLICY_UNLIMITED */
        uint32_t cpu_quota;      /* CPUQuota=, percent of one CPU, 0 = none */
        uint64_t limit_nofile;   /* LimitNOFILE=, default 1024 */
        uint64_t call_timeout_ms;/* CallTimeout=, default 30 s */
        uint64_t runtime_max_ms; /* RuntimeMax=, 0 = none */
        uint64_t start_timeout_ms; /* StartTimeout=, default 10 s: from start to the hello */
        uint64_t log_lines;      /* LogLinesPerSecond=, 0 = gadgetd's default */
        uint64_t log_bytes;      /* LogBytesPerSecond=, 0 = gadgetd's default */
        uint64_t binding_calls_max; /* BindingCallsMax=: binding calls in flight, all bindings */
        uint64_t frame_values_max;  /* FrameValuesMax=: values in one frame from the gadget */
        uint64_t frame_values_per_s; /* FrameValuesPerSecond=: values of its frames gadgetd decodes in a
                                      * second (a frame counts at least 1); past it, it waits */
        uint64_t frame_bytes_per_s;  /* FrameBytesPerSecond=: bytes of its frames gadgetd reads and of
                                      * the answers to its binding calls gadgetd sends, a second; past
                                      * it, it waits */
        uint64_t turn_frames_max;   /* TurnFramesMax=: its frames gadgetd handles per loop turn */
        uint64_t turn_bytes_max;    /* TurnBytesMax=: their bytes per loop turn */
        uint64_t calls_queued_max;  /* CallsQueuedMax=: calls to the gadget in flight (more: busy) */
        enum policy_restart restart; /* Restart=, default no */
        enum policy_start start; /* Start=, default always */
        uint64_t idle_stop_ms;   /* IdleStop=: stopped (idle) after this long without activity; 0 = never */
        enum policy_types require_types; /* RequireTypes=, default gadgetd's */
        char *ui;                /* UI=, absolute path of the gadget's HTML UI, or NULL */
        /* A gatekeeper: holds credentialed bindings, exposes narrow methods. */
        bool gatekeeper;         /* Gatekeeper=, default no */
        char **admin_methods;    /* AdminMethods=: only its admin UI may call these */
        size_t n_admin_methods;
        char *admin_ui;          /* AdminUI=, like UI=; only with Gatekeeper=yes */
        char **approve;          /* Approve=: its methods whose every call waits for approval */
        size_t n_approve;
        uint64_t approve_timeout_ms; /* ApproveTimeout=, default POLICY_APPROVE_TIMEOUT_MS */
        char **nodes;            /* Nodes=: the nodes that may run it, preferred first; NULL: any */
        size_t n_nodes;
        struct policy_schedule *schedules; /* Schedule=, in the file's order */
        size_t n_schedules;
        struct policy_binding *bindings;
        size_t n_bindings;
        char **warnings;         /* "FILE:LINE: warning: ..." for keys that load but do nothing */
        size_t n_warnings;
        char *text;              /* the file's bytes as read and parsed (policy_load_fd), NUL-ended;
                                  * NULL for policy_parse's */
        size_t text_len;
        struct policy_written *written; /* what the file set, key by key (changes.c) */
        size_t n_written;
};

/* One [Gadget] key ("MemoryMax") or one binding ("[Binding NOTES]") the
 * file set, with a hash of its values as written (a binding's: of its keys
 * and values), in the file's order. */
struct policy_written {
        char *what;
        uint64_t hash;
};

/* Every problem found in one file, each "FILE:LINE: problem". */
struct policy_errors {
        char **msgs;
        size_t n;
};

/* The format: '#' or ';' starts a comment at the start of a line or after a
 * blank (so a value cannot hold " #" or " ;"); indented continuation lines
 * are refused; a line holds at most 198 bytes (inih's buffer); keys are
 * case-sensitive; Environment=, ReadOnlyPaths=, Allow= and Schedule= accumulate, any
 * other key given twice in a section is an error. Limits must be above 0.
 *
 * Parses and validates path. Returns 0 with *out set, or a negative errno
 * with every problem found appended to errs (nothing is returned half
 * loaded). */
int policy_load(const char *path, struct policy **out, struct policy_errors *errs);
/* The same from fd, opened by the caller with POLICY_OPEN_FLAGS (path is
 * for messages and p->path): a regular file of at most POLICY_MAX_FILE
 * bytes, refused by its size before any read. *hash (may be NULL) gets
 * the FNV-1a hash of the bytes parsed, to tell a changed file. */
int policy_load_fd(int fd, const char *path, unsigned flags, struct policy **out,
                   struct policy_errors *errs, uint64_t *hash);
/* The same, from text in memory; name is used in messages and as path. */
int policy_parse(const char *name, const char *text, size_t len, struct policy **out,
                 struct policy_errors *errs);
void policy_free(struct policy *p);
/* The keys ("CallTimeout") and bindings ("[Binding NOTES]") whose values
 * differ between old and new, set in one and not the other included: new's
 * in its order, then those only old set; at most max in out (pointing
 * into old and new). The count. */
size_t policy_changed(const struct policy *old, const struct policy *new, const char **out, size_t max);
void policy_errors_clear(struct policy_errors *errs);
const struct policy_binding *policy_binding_find(const struct policy *p, const char *name);
/* Whether name is in the NULL-terminated list v (NULL: an empty one). */
bool policy_listed(char *const *v, const char *name);
/* Whether method is one of the gadget's AdminMethods=. */
static inline bool policy_admin_method(const struct policy *p, const char *method)
{
        return policy_listed(p->admin_methods, method);
}
const char *policy_binding_type_name(enum binding_type t);
/* Whether the values of a binding call to binding name of p (its
 * arguments and its answer) may never be shown to anyone: a secret
 * binding's (its answer is the secret), and a binding p does not declare
 * (its type unknown: fail closed). The one rule every view of binding
 * values follows (gadgetctl trace NAME); the audit and tail bindings
 * show none at all. */
bool policy_binding_private(const struct policy *p, const char *name);
/* p as key=value lines ([Gadget], then each [Binding NAME]): every key
 * with the value in force, defaults included, sizes and times as an
 * operator writes them (16M, 30s). *out is malloc'd. 0 or -errno. */
int policy_format(const struct policy *p, char **out);
const char *policy_restart_name(enum policy_restart r);
const char *policy_start_name(enum policy_start s);
const char *policy_netns_name(enum policy_netns n);

/* Value parsers shared with other config files. Return 0 or -EINVAL. */
int policy_parse_size(const char *s, uint64_t *out);     /* 512, 64K, 16M, 1G, infinity */
int policy_parse_duration(const char *s, uint64_t *ms);  /* 250ms, 5s, 2min; bare = seconds */
int policy_parse_bool(const char *s, bool *out);         /* yes/no true/false on/off 1/0 */
int policy_parse_count(const char *s, uint64_t *out);    /* 16, infinity: no suffixes */

/* The interpreter path needs before it can run: PT_INTERP of an ELF file
 * or the first word of a #! line, into out. 1 if there is one, 0 if none
 * (a static program, or a file of another kind), or -errno. */
int policy_interpreter(const char *path, char *out, size_t len);

/* Splits s into words like a shell without expansions: blanks separate,
 * 'single' quotes are literal, "double" quotes take \" and \\, a backslash
 * outside quotes escapes the next character. Returns 0 with a NULL-terminated
 * *words of *n_words items, -EINVAL on an unterminated quote or a trailing
 * backslash, or -ENOMEM. */
int policy_split_words(const char *s, char ***words, size_t *n_words);
/* Appends s (taken over) to the NULL-terminated vector *v of *n items. */
int policy_strv_push(char ***v, size_t *n, char *s);
void policy_strv_free(char **v);
