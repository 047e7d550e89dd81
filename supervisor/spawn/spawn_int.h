/* spawn_int: what spawn.c shares with enter.c. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

struct spawn_helper;

/* Starts gadgetd-sandbox (with mode as its one argument if not NULL) in a
 * child cloned with flags (the namespaces it makes), its setup socket at
 * SANDBOX_FD_SETUP; gadgetd's end in *setup_fd. 0, or -errno with err
 * (no child is left). */
int spawn_helper_start(const struct spawn_helper *h, int flags, const char *mode, pid_t *pid, int *pidfd,
                       int *setup_fd, char *err, size_t errlen);
/* SANDBOX_CGROUP_MSG with the "tasks" files of the v1 cgroups to join. */
int spawn_send_cgroups(int sock, const int *fds, size_t n);
/* Moves the calling thread into the network namespace shared by the
 * gadgets with NetworkNamespace=shared (made at the first call), for a
 * clone; spawn_netns_leave moves it back. 0 or -errno with err (then it
 * has not moved). netns.c. */
int spawn_netns_enter_shared(char *err, size_t errlen);
void spawn_netns_leave(void);
