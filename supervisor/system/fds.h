/* fds: gadgetd's own file descriptors. */
#pragma once

/* Marks every open fd above 2 close-on-exec: gadgetd's own are so from
 * birth, but fds inherited from whoever started gadgetd, and those a
 * library makes without O_CLOEXEC (libcurl's internal socketpair), are
 * not. */
void fds_cloexec_all(void);
