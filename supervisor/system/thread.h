/* thread: the one way gadgetd starts a thread of its own (the kv store's,
 * the snapshots', the policy loads', the installs', the releases'). */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* Starts fn(arg) on a new thread that takes no signals (every signal is
 * blocked in it from its first instruction: they stay with the loop's
 * thread, whose handlers and signalfd expect them), with a stack of
 * stack bytes (0: the default), detached (never joined) or not. *t: its
 * id. 0, or -errno (no thread). */
int thread_start(pthread_t *t, void *(*fn)(void *), void *arg, size_t stack, bool detached);
