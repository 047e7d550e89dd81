/* spawn: gadgetd's side of starting a worker — clone into new namespaces,
 * write the id maps, and wait until the sandbox is entered or has failed. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "filter.h"

struct cgroup;
struct policy;

struct spawn_opts {
        const struct policy *policy;
        char *const *args;               /* replace the policy's Arguments if not NULL */
        const struct gadget_filter *filter; /* compiled once per gadgetd */
        uid_t host_uid;                  /* the gadget's host uid and gid */
        int stdout_fd, stderr_fd;        /* where the program's output goes */
        const struct cgroup *cgroup;     /* joined before the sandbox is set up, or NULL */
        uint64_t nproc;                  /* RLIMIT_NPROC, from limiter_start */
        uint64_t address_space;          /* RLIMIT_AS, UINT64_MAX for none */
};

struct spawn_child {
        pid_t pid;      /* PID 1 of the gadget's namespace, in gadgetd's view */
        int pidfd;      /* refers to pid without reuse races */
        int rpc_fd;     /* gadgetd's end of the socketpair, non-blocking */
        int report_fd;  /* read end of the report pipe (wait status at the end) */
};

/* Starts the gadget. Returns 0 once the program was exec'd inside its
 * sandbox, or -errno with err saying which step failed and why (the child
 * is gone by then). */
int spawn_gadget(const struct spawn_opts *opts, struct spawn_child *child, char *err, size_t errlen);
/* Reads one record from the report pipe: returns its type ('S' sets
 * *status), 0 at end of file, or -errno. */
int spawn_read_report(int report_fd, int *status, char *msg, size_t msglen);
void spawn_child_close(struct spawn_child *child);
