/* check: local validation of policy files, with no daemon: the `check`
 * command and the first step of `load`. */
#pragma once

#include "cmd.h"

/* `check FILE...`: "FILE: ok" or every error of each file on stdout (JSON:
 * [{"file":...,"ok":...,"errors":[...]}]). Exit status 0, or 1 if any file
 * is invalid. */
int check_run(const struct ctl *ctl, const struct cmd_args *a);
/* Validates path before `load` sends it: 0 if valid, else prints every
 * FILE:LINE error on stderr and returns CTL_EXIT_FAILED. */
int check_policy(const struct ctl *ctl, const char *path);
