/* denials: the system calls a gadget's filter refused, by call and errno,
 * as its sandbox's init counted and reported them (worker/sandbox/
 * denials.c, checked by proto/validate.c), summed since the gadget was
 * loaded, over all its runs. Shown by status, gadgetctl denials, the
 * metrics and the workshop; each report is also an audit record per call
 * (unit_denials.c). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "sandbox_abi.h"

struct spawn_denial;

/* Distinct (call, errno) pairs kept per gadget; refusals of others are
 * counted in total and untracked only. */
#define DENIALS_KEPT 64
/* The audit's and the log's summary of refusals: one a window. */
#define DENIALS_WINDOW_MS 1000

struct denial {
        uint32_t nr, error;          /* error 0: a kill for a call of a foreign ABI */
        uint64_t count, first_ms, last_ms;  /* times: ms since the epoch */
        char path[SANDBOX_DENIAL_PATH_MAX + 1];  /* the last path seen, "" if none */
};

struct denials {
        size_t n;
        uint64_t total, untracked;
        struct denial d[DENIALS_KEPT];
};

/* A learning run's paths the program could not find (gadgetd run
 * --learn), in the order they were first seen; at most LEARNED_MAX. */
#define LEARNED_MAX 1024
struct learned {
        size_t n;
        struct spawn_learned *v;
};

/* Adds one reported call to t. */
void denials_add(struct denials *t, const struct spawn_denial *in);
/* The call's name ("socket"; "a call of a foreign ABI" for a kill) and
 * the answer's ("EACCES"; "killed"). */
const char *denial_call(const struct denial *d);
/* System call nr's name (x86-64), NULL if unknown. */
const char *denials_call_name(uint32_t nr);
const char *denial_answer(const struct denial *d);
