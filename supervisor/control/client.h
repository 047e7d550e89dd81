/* client: one connection on the control socket, as the request handlers
 * see it — send answers, follow logs, own calls in flight. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "control.pb-c.h"
#include "core/core.h"
#include "system/peercred.h"
#include "validate.h"

struct control;
struct control_env;

struct client {
        struct control *ctl;
        struct conn *conn;          /* the socket, its frames and queue of answers */
        struct peercred cred;       /* who connected (kernel's record) */
        char caller[40];            /* its calls' caller: "gadgetctl (uid N)", written once */
        bool spoke;                 /* its first request came, of our protocol version */
        bool refused;               /* of another version: the rest is not read */
        struct call_owner calls;    /* its gadget calls in flight (core/calls.h) */
        LIST_HEAD(, client_load) loads; /* its loads in flight */
        unsigned n_loads;           /* their number (at most CONTROL_WAITING_MAX) */
        struct stream *stream;      /* the long answer being sent (logs, audit), if any */
        int fds[CONTROL_EXEC_FDS];  /* the fds of the request being handled (exec's) */
        size_t n_fds;               /* a handler that keeps them sets 0 */
        struct exec_probe *exec;    /* its exec running, if any */
        struct frame_follower *frames; /* the gadget's frames it follows (frames.c), if any */
        LIST_ENTRY(client) link;    /* in its control's clients */
};

/* A load or a move in flight: an answer that comes later; it outlives its
 * client if the client leaves first. */
struct client_load {
        struct client *client;      /* NULL once the client is gone */
        uint64_t id;
        LIST_ENTRY(client_load) link; /* in its client's loads, while it has one */
};

const struct control_env *client_env(const struct client *cl);
/* Queues r. 0, or -EMSGSIZE (larger than a frame), -ENOBUFS (the client's
 * queue is full): the answer is not sent. */
int client_send(struct client *cl, Control__Response *r);
/* Queues the answer to request id whose message is body (answer_of), as
 * client_send. */
int client_answer(struct client *cl, uint64_t id, const ProtobufCMessage *body);
void client_error(struct client *cl, uint64_t id, int code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
void client_done(struct client *cl, uint64_t id, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* An answer cl will get later; NULL with errno EAGAIN (cl awaits
 * CONTROL_WAITING_MAX answers already) or ENOMEM. */
struct client_load *client_load_new(struct client *cl, uint64_t id);
/* Refuses request id, for which client_load_new failed with errno e. */
void client_load_refused(struct client *cl, uint64_t id, int e);
/* client_load_new, or NULL with request id refused (client_load_refused). */
struct client_load *client_load_begin(struct client *cl, uint64_t id);
/* Unlinks and frees a load; returns its client (NULL if gone). */
struct client *client_load_end(struct client_load *c);
/* A pending answer's end (arg: its struct client_load), to a client
 * still there: Done with msg, or the error code with msg (a move's, a
 * forget's). Frees the load. */
void client_load_answer(void *arg, int code, const char *msg);

/* Request handlers (supervisor/control/requests.c); requests are validated. */
void request_handle(struct client *cl, const Control__Request *req);
/* logs and audit (supervisor/control/lines.c): answered through stream.c. */
void request_logs(struct client *cl, const Control__Request *req);
void request_audit(struct client *cl, const Control__Request *req);
/* gadgetctl daemon-reexec (control.c): root's, one at a time. */
void control_reexec_ask(struct client *cl, uint64_t id);
/* gadgetctl cat (cat.c). */
void request_cat(struct client *cl, const Control__Request *req);
/* gadgetctl nodes and nodes forget (nodes.c). */
void request_nodes(struct client *cl, const Control__Request *req);
/* top.c: gadgetctl top, every gadget's counters (what list shows any member). */
void request_top(struct client *cl, const Control__Request *req);
void request_forget_node(struct client *cl, const Control__Request *req);
/* Closes the request's fds that no handler took. */
void client_close_fds(struct client *cl);
/* gadgetctl exec (exec.c): root's; the probe ends with its client. */
void request_exec(struct client *cl, const Control__Request *req);
void exec_client_gone(struct client *cl);
/* gadgetctl install and versions (install.c). */
void request_install(struct client *cl, const Control__Request *req);
void request_versions(struct client *cl, const Control__Request *req);
/* One install at a time of root, one of the others (control.c): the
 * slot cl's job j takes (0: busy), given back by control_install_end. */
struct install_job;
unsigned control_install_begin(struct client *cl, struct install_job *j);
void control_install_end(struct control *c, unsigned slot);
/* At control_free: an install whose thread still runs is left to it; its
 * answer and loop event go (install.c). */
void install_abandon(struct install_job *j);
/* gadgetctl backup and restore (backup.c): root's, with the file's fd. */
void request_backup(struct client *cl, const Control__Request *req);
void request_restore(struct client *cl, const Control__Request *req);
/* gadgetctl deploy and rollback (deploy.c): the changes of version whose
 * start is awaited, in their control (control_deploys). */
struct deploy_job;
LIST_HEAD(deploy_list, deploy_job);
struct deploy_list *control_deploys(struct control *c);
void request_deploy(struct client *cl, const Control__Request *req);
void request_rollback(struct client *cl, const Control__Request *req);
/* An install whose load was done (install.c): its answer (text: what it
 * did, ": ready" added) waits for the new version's start as a deploy's;
 * a start that fails is rolled back to prev (the store's previous put
 * back to previous), the version kept installed. */
void deploy_after_install(struct client_load *ans, struct control *ctl, const struct control_env *env, uid_t uid,
                          const char *name, const char *version, const char *prev, const char *previous,
                          const char *text);
/* Deploys version of name (ans answered at the end; NULL: no one waits):
 * 0, -EBUSY if another deploy, rollback or install runs (ans untouched),
 * -ENOMEM. */
struct unit_rollout_bound;
struct unit;
int deploy_start(struct control *ctl, const struct control_env *env, uid_t uid, struct client_load *ans,
                 const char *name, const char *version, bool rollback, bool with_state, unsigned percent,
                 const struct unit_rollout_bound *bound);
/* A running rollout of u sent back as gadgetctl rollback does (deploy_rollout.c). */
void deploy_rollout_back(struct unit *u, const char *why);

/* The versions and rollouts in a cluster's store (deploy_store.c). */
struct deploy_store;
struct control_releases;
struct deploy_store *control_deploy_store(struct control *c);
/* Starts it when env's releases name a store (else *out NULL). 0 or -errno. */
int deploy_store_new(struct control *ctl, const struct control_env *env, struct deploy_store **out);
void deploy_store_free(struct deploy_store *ds);
/* Whether the store holds the versions (its schema has the tables). */
bool deploy_store_active(struct control *ctl);
/* 1: a deploy, rollback or install goes through the store; 0: this
 * node's own (no store, or one of a schema before 15); -EAGAIN: the store
 * is configured but not read yet (the first round after the start, or
 * its thread cannot reach it, or its schema is past what this node may
 * use): refused with why, never applied here alone. */
int deploy_store_gate(struct control *ctl, char *why, size_t len);
/* A deploy or rollback through the store: its row, then applied here. */
void deploy_store_request(struct client *cl, uint64_t id, const char *name, const char *version, bool rollback,
                          bool with_state, unsigned percent, const struct unit_rollout_bound *bound);
/* An install's row (version current): done(arg, 0 | -errno, why) later. 0 or -errno. */
int deploy_store_install(struct control *ctl, const char *name, const char *version,
                         void (*done)(void *, int, const char *), void *arg);
/* An install's bundle into the store (on its thread): 0 (*published:
 * whether the store holds the versions) or a GADGET_E* with msg. */
int deploy_store_publish(const struct control_releases *rel, const uint8_t *buf, size_t len, const char *name,
                         const char *version, const char *signer, uid_t uid, char *msg, size_t msglen,
                         bool *published, int64_t *pruned);
/* A bundle from the store, checked and unpacked as an install's (on a
 * thread): 0 or a GADGET_E* with msg; the bundle's own name, version and
 * signer's key in name[64], version, signer. */
int install_from_store(const struct control_releases *rel, const uint8_t *buf, size_t len, uid_t uid, char *name,
                       char *version, char *signer, char *msg, size_t msglen);
/* An automatic rollback here (version went back to to, or its rollout
 * ended: to NULL), written for every node (ctl unused: the control's
 * store while it lives; a rollout may end after the control went). */
void deploy_store_went_back(struct control *ctl, const char *name, const char *version, const char *to,
                            const char *previous, const char *why);
struct deploy_store_info {
        uint64_t gen;
        const char *node, *refused, *rollout, *why;
        unsigned percent;
};
void deploy_store_status(struct control *ctl, const char *name, struct deploy_store_info *out);
/* The refusals of name's bundles seen here (the last few), at most max. */
size_t deploy_store_refused(struct control *ctl, const char *name, const char **version, const char **node,
                            const char **why, size_t max);

/* At control_free: the deploys in flight answer and end on their own. */
void deploy_abandon_all(struct deploy_list *l);
/* gadgetctl trace (trace.c). */
void request_trace(struct client *cl, const Control__Request *req);
/* gadgetctl trace NAME (frames.c): root's; followed until the client leaves. */
void request_frames(struct client *cl, const Control__Request *req);
/* The control's followers of frames (NULL: none kept). */
struct frames *client_frames(const struct client *cl);
