/* deploy_state: the gadget's state around a change of version
 * (docs/releases.md, "State kept with each version"). Before every
 * deploy (at once, or a staged rollout's start), and an install's new
 * current version, its kv keys and alarms are backed up, in gadgetctl
 * backup's format, into the version left:
 * releases/NAME/VERSION/state.backup. gadgetctl rollback
 * --with-state holds the gadget idle (core's unit_hold: calls wait),
 * backs up the state of the version it leaves the same way, and restores
 * the one kept with the version it goes back to; the deploy then loads
 * that version and the hold ends (deploy_state_release). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct client;
struct core;

#define DEPLOY_STATE_FILE "state.backup"    /* in releases/NAME/VERSION/ */
#define DEPLOY_STATE_NONE (-1)              /* deploy_state_begin: nothing to keep */

/* The end of the state's step: code 0 (the deploy goes on; msg says what
 * was kept), or a GADGET_E* code with msg (the deploy is refused: nothing
 * of the gadget changed, its state either). Called once, from the loop. */
typedef void (*deploy_state_fn)(void *arg, int code, const char *msg);

/* The state's step before name's deploy from version from (the store's
 * current, "" if none) to version to; with_state: a rollback that
 * restores to's kept state. 0: done is called later; DEPLOY_STATE_NONE:
 * nothing to keep (no version left, or no such gadget loaded): go on now,
 * done never called; else a GADGET_E* code with msg (done never called). */
int deploy_state_begin(struct core *core, const char *state_dir, const char *name, const char *from, const char *to,
                       bool with_state, deploy_state_fn done, void *arg, char *msg, size_t len);
/* gadgetctl rollback NAME --with-state may go on: root asks, no rollout
 * runs, and the version before keeps a state; else cl is answered why
 * (request id) and false. */
bool deploy_state_ok(struct client *cl, uint64_t id, const char *state_dir, const char *name);
/* A rollback with its state: the version it restored is loaded (or its
 * load failed): the gadget's hold ends, its calls start it. */
void deploy_state_release(struct core *core, const char *name);
/* Whether version of name keeps a state backup: its size and time
 * (mtime, ms since the epoch); false if none. */
bool deploy_state_kept(const char *state_dir, const char *name, const char *version, unsigned long long *bytes,
                       long long *ms);
