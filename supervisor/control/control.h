/* control: the control socket — who may connect, framing, and one handler
 * per request kind (load, stop, restart, list, status, call, logs, reload). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

struct core;
struct unit;
struct control;
struct peercred;
struct event_base;

/* What the control socket's clients may cost gadgetd (daemon settings). */
#define CONTROL_MAX_CONNECTIONS 64     /* ControlMaxConnections= */
#define CONTROL_MAX_PER_USER 8         /* ControlMaxConnectionsPerUser= */
#define CONTROL_QUEUE_BYTES (256u << 10) /* ControlQueueSize= */
/* Answers one connection may await at once: its loads, restarts and moves
 * in progress, and the waits of load, start and restart until the gadget
 * is ready. Past it, the request is refused as busy (a client that
 * pipelines a thousand starts holds no more than this). */
#define CONTROL_WAITING_MAX 16
/* Values one request may hold (counted on its packed bytes before it is
 * unpacked; as FrameValuesMax='s default for a gadget): a request past it
 * ends the connection. */
#define CONTROL_FRAME_VALUES_MAX 131072
/* Bytes of requests one user but root may send, and of answers it may be
 * sent, a second, on all its connections together (counted per whole
 * request or answer; system/rate.h, so one second's worth may come at
 * once): past it, that user's connections are read no more until what it
 * sent and was sent has drained back to the budget, however often it
 * reconnects. */
#define CONTROL_USER_BYTES_PER_S (8u << 20)
struct control_limits {
        unsigned max_connections;  /* of all users but root together; root has as many of its own */
        unsigned max_per_user;     /* of one uid other than root */
        size_t queue_bytes;        /* unsent answers before a client counts as not reading */
};

/* What a reload did with one file (its gadget's name) or gadget; the text
 * noted is the gadget's name, or for RELOAD_ERROR (a file whose gadget is
 * not loaded) the file's errors. RELOAD_KEPT: the gadget's file has errors
 * and it keeps its policy (unit_keep_policy holds them). */
enum control_reload_what {
        RELOAD_LOADED, RELOAD_STOPPED, RELOAD_RESTARTED, RELOAD_UNCHANGED, RELOAD_ERROR, RELOAD_KEPT,
        RELOAD_WHATS
};
/* keys: with RELOAD_RESTARTED, the policy's keys and bindings that
 * changed ("CallTimeout", "[Binding NOTES]"), one a line; else "". */
typedef void control_reload_note(void *arg, enum control_reload_what what, const char *text, const char *keys);
/* The end of a load: 0 with the gadget's name and a summary in msg, or
 * -errno with every error in msg ("FILE:LINE: ..." lines). */
typedef void control_load_done(void *arg, int err, const char *name, const char *msg);

/* gadgetctl install (install.c): where the store is and whose bundles
 * gadgetd takes (gadgetd.conf's [Releases]). */
struct control_releases {
        const char *state_dir;
        const uint8_t (*trusted)[32];  /* TrustedKeys=: Ed25519 public keys */
        size_t n_trusted;
        bool allow_unsigned;       /* AllowUnsigned=: root may install unsigned or unknown-key bundles */
        unsigned keep;             /* VersionsKept= */
        /* Store=postgresql: StoreConnection= and Node= (deploy_store.c:
         * the versions and rollouts are the store's); NULL: this node's own. */
        const char *conninfo;
        const char *node;
};

/* What the control socket serves, and the owner's two requests on the
 * policy files (the daemon's: control/ calls nothing above it). */
struct control_env {
        struct event_base *base;
        struct core *core;
        const char *socket_path;
        const char *group;         /* may use the socket besides root */
        gid_t group_gid;           /* (gid_t)-1 if the group does not exist */
        struct control_limits limits;
        /* Loads one policy file and starts its gadget (done runs later, on
         * the loop), read with cred's rights; recorded for gadgetd's next
         * start unless runtime. 0, -EBUSY if cred's user has as many loads
         * in flight as it may, -errno. */
        int (*load)(void *arg, const char *path, bool runtime, const struct peercred *cred,
                    control_load_done *done, void *done_arg);
        /* Re-reads gadget name's policy file (with cred's rights, unless it
         * is the policy directory's) and restarts it on what it read; done
         * says "restarting NAME...", or -errno with the file's errors (the
         * gadget keeps its policy). 0, -ENOENT (no such gadget), -EBUSY as
         * load, -errno. */
        int (*restart)(void *arg, const char *name, const struct peercred *cred, control_load_done *done,
                       void *done_arg);
        /* Forgets the recorded load of gadget name (gadgetctl unload): its
         * file is not loaded at gadgetd's next start. 0 (also when there was
         * none) or -errno. */
        int (*forget)(void *arg, const char *name);
        /* Re-reads the policy directory, telling note what it did. */
        void (*reload)(void *arg, control_reload_note *note, void *note_arg);
        /* gadgetctl daemon-reexec (root's, one at a time): begins gadgetd's
         * re-exec; its requester is answered by control_reexec_failed, or
         * by the new image (control_reexec_answer). NULL: not offered. */
        void (*reexec)(void *arg);
        /* The gateway's address ("127.0.0.1:PORT"), or NULL: no gateway. */
        const char *(*gateway_address)(void *arg);
        void *arg;
        struct control_releases releases;
        /* A re-exec'd gadgetd's listening socket, kept from the old image
         * (adopt true; adopt_activated: systemd made it). */
        bool adopt;
        int adopt_fd;
        bool adopt_activated;
};

/* Listens on env->socket_path (mode 0660, group env->group), clients held
 * to env->limits. env is copied. 0 or -errno. */
int control_open(const struct control_env *env, struct control **out);
/* Its connections open, those refused (outside the group, over a limit)
 * and clients dropped for not reading their answers, since it opened. */
void control_stats(const struct control *c, uint64_t *connections, uint64_t *refused, uint64_t *slow);
void control_free(struct control *c);
/* The re-exec asked for: the listening socket and whether systemd made it,
 * the requester's fd and request id (*answer_fd -1: it left). */
void control_reexec_info(const struct control *c, int *listen_fd, bool *activated, int *answer_fd,
                         uint64_t *answer_id);
/* Holds (hold true) or releases every client's input while a re-exec
 * waits for its gadgets' calls to end. */
void control_reexec_hold(struct control *c, bool hold);
/* The re-exec did not happen: its requester gets code and msg. */
void control_reexec_failed(struct control *c, int code, const char *msg);
/* A control connection a re-exec hands on: its fd, whether its first
 * request came (of this protocol version), and what was read of it and
 * not handled (pipelined requests, a partial frame). */
struct control_handoff {
        int fd;
        bool spoke;
        const uint8_t *input;
        size_t input_len;
};
/* Whether the connections can be handed on now: every answer sent, no
 * load in flight. 0, or -EBUSY with why. */
int control_reexec_quiet(const struct control *c, char *why, size_t len);
/* The connections handed on, up to max (not those following logs or whose
 * input ended: they close at the exec): their number (out NULL: only
 * counted). */
size_t control_reexec_clients(const struct control *c, struct control_handoff *out, size_t max);
/* In the new image: a connection handed on (its fd taken, whatever the
 * outcome) is a client again, its input read on from where it was. 0 or
 * -errno. */
int control_adopt_client(struct control *c, const struct control_handoff *h);
/* In the new image: the client on fd, who asked for the re-exec, gets Done
 * with msg for request id. */
void control_reexec_done(struct control *c, int fd, uint64_t id, const char *msg);
/* New log lines of u for clients following its log. */
void control_log_added(struct control *c, struct unit *u, size_t lines);
/* A new audit record of gadget, for clients following its audit log. */
void control_audit_added(struct control *c, const char *gadget, const char *line);
